package simdevice

import "testing"

// TestCPUTopology: the individual mode's host for counts that split unevenly.
func TestCPUTopology(t *testing.T) {
	for _, tc := range []struct {
		cpus         int
		smt          bool
		sockets      int
		device, cpu  int
		core, socket int
	}{
		{cpus: 128, smt: true, sockets: 2, device: 1, cpu: 64, core: 0, socket: 0},
		{cpus: 128, smt: true, sockets: 2, device: 127, cpu: 127, core: 63, socket: 1},
		{cpus: 128, smt: true, sockets: 2, device: 64, cpu: 32, core: 32, socket: 1},
		// 3 cores: one socket.
		{cpus: 6, smt: true, sockets: 1, device: 5, cpu: 5, core: 2, socket: 0},
		// An odd count: no SMT, each CPU its own core, in order.
		{cpus: 5, smt: false, sockets: 1, device: 3, cpu: 3, core: 3, socket: 0},
		{cpus: 1, smt: false, sockets: 1, device: 0, cpu: 0, core: 0, socket: 0},
	} {
		h := cpuTopology{cpus: tc.cpus}
		c := h.cpu(tc.device)
		if h.smt() != tc.smt || h.sockets() != tc.sockets || c != tc.cpu || h.core(c) != tc.core || h.socket(c) != tc.socket {
			t.Errorf("%d CPUs, device %d: smt %v sockets %d cpu %d core %d socket %d, want %+v",
				tc.cpus, tc.device, h.smt(), h.sockets(), c, h.core(c), h.socket(c), tc)
		}
	}
}
