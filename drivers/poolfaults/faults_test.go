package poolfaults

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/simdevice"
)

func pool(spec simdevice.PoolSpec) *simdevice.Pool {
	spec.TargetNodes = []string{"node-a"}
	p := &simdevice.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: spec}
	p.Default()
	return p
}

func TestSetReplacesFaultOfSameDevice(t *testing.T) {
	p := pool(simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: 2})
	p.Spec.Faults = []simdevice.Fault{{Device: DeviceRef("1"), Mode: simdevice.FaultUnhealthy}}
	out, err := Set(p, simdevice.Fault{Device: DeviceRef("gpu-1"), Mode: simdevice.FaultDisappear})
	if err != nil || len(out) != 1 || out[0].Mode != simdevice.FaultDisappear {
		t.Fatalf("got %v %v, want one disappear fault (index 1 and gpu-1 are one device)", out, err)
	}
	if _, err := Set(p, simdevice.Fault{Device: DeviceRef("gpu-2"), Mode: simdevice.FaultUnhealthy}); err == nil || !strings.Contains(err.Error(), "gpu-0..gpu-1") {
		t.Fatalf("want an error naming the devices, got %v", err)
	}
}

func TestSetOnDeviceGroups(t *testing.T) {
	p := pool(simdevice.PoolSpec{DeviceGroups: []simdevice.DeviceGroup{
		{DeviceType: "gpu", Count: 2, BindingConditions: []string{"ready"}, BindingFailureConditions: []string{"failed"}},
		{DeviceType: "nic", Count: 1},
	}})
	out, err := Set(p, simdevice.Fault{Device: DeviceRef("gpu-1"), Mode: simdevice.FaultBindingFailure})
	if err != nil || len(out) != 1 {
		t.Fatalf("got %v %v", out, err)
	}
	p.Spec.Faults = out
	if out, err = Set(p, simdevice.Fault{Device: DeviceRef("nic-0"), Mode: simdevice.FaultUnhealthy}); err != nil || len(out) != 2 {
		t.Fatalf("a fault on another group's device is added: %v %v", out, err)
	}
	if out, err = Set(p, simdevice.Fault{Device: DeviceRef("gpu-1"), Mode: simdevice.FaultHealthy}); err != nil || len(out) != 0 {
		t.Fatalf("healthy removes the device's fault: %v %v", out, err)
	}
	if _, err := Set(p, simdevice.Fault{Device: DeviceRef("0"), Mode: simdevice.FaultUnhealthy}); err == nil || !strings.Contains(err.Error(), "gpu-0..gpu-1, nic-0..nic-0") {
		t.Fatalf("an index names no device with deviceGroups: %v", err)
	}
}

func TestNewFault(t *testing.T) {
	f, err := NewFault("gpu-1", "node-a", "xid", 79)
	if err != nil || f.Mode != simdevice.FaultXID || f.XID == nil || *f.XID != 79 || f.Node != "node-a" || f.Device.StrVal != "gpu-1" {
		t.Fatalf("got %+v %v", f, err)
	}
	if f, err := NewFault("0", "", "ecc", 0); err != nil || f.XID != nil || f.Device.IntVal != 0 {
		t.Fatalf("ecc: %+v %v", f, err)
	}
	for _, tc := range []struct {
		mode string
		xid  int64
		want string
	}{
		{"xid", 0, "needs the XID code"},
		{"xid", 1000, "between 1 and 999"},
		{"ecc", 48, "mode ecc is XID 48"},
		{"unhealthy", 79, "only given with mode xid"},
		{"broken", 0, "unknown fault mode"},
	} {
		if _, err := NewFault("0", "", tc.mode, tc.xid); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewFault(%s, %d): %v, want %q", tc.mode, tc.xid, err, tc.want)
		}
	}
}

func TestSetDriverFaults(t *testing.T) {
	p := pool(simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: 2, Profile: simdevice.ProfileNvidiaGPU})
	f, _ := NewFault("1", "node-a", "ecc", 0)
	out, err := Set(p, f)
	if err != nil || len(out) != 1 {
		t.Fatalf("got %v %v", out, err)
	}
	p.Spec.Faults = out
	// A new XID on the device replaces its previous fault, as the driver overwrites the taint.
	f, _ = NewFault("gpu-1", "node-a", "xid", 79)
	if out, err = Set(p, f); err != nil || len(out) != 1 || *out[0].XID != 79 {
		t.Fatalf("got %+v %v", out, err)
	}
	p.Spec.Faults = out
	f, _ = NewFault("1", "node-a", "healthy", 0)
	if out, err = Set(p, f); err != nil || len(out) != 0 {
		t.Fatalf("healthy clears the xid fault: %+v %v", out, err)
	}
	other := pool(simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: 2, Profile: simdevice.ProfileAMDGPU})
	f, _ = NewFault("1", "", "gpu-lost", 0)
	if _, err := Set(other, f); err == nil || !strings.Contains(err.Error(), `ns/p: mode gpu-lost is a health event of the NVIDIA GPU driver, and its profile "amd-gpu" does not publish it (profiles that do: nvidia-gpu, nvidia-gpu-b200, nvidia-gpu-gb200, nvidia-gpu-h200, nvidia-gpu-shares)`) {
		t.Fatalf("want the profile refused, got %v", err)
	}
}

func TestMerge(t *testing.T) {
	p := pool(simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: 2, Profile: simdevice.ProfileNvidiaGPU})
	p.Spec.Faults = []simdevice.Fault{{Device: DeviceRef("gpu-1"), Node: "node-a", Mode: simdevice.FaultUnhealthy}, {Device: DeviceRef("0"), Mode: simdevice.FaultDisappear}}
	ecc, _ := NewFault("1", "node-a", "ecc", 0)
	out, err := Merge(p, []simdevice.Fault{ecc})
	if err != nil || len(out) != 2 || out[0].Mode != simdevice.FaultDisappear || out[1].Mode != simdevice.FaultECC {
		t.Fatalf("got %+v %v: the campaign's fault replaces the device's fault on the node", out, err)
	}
	if len(p.Spec.Faults) != 2 || p.Spec.Faults[0].Mode != simdevice.FaultUnhealthy {
		t.Fatalf("Merge changed the pool: %+v", p.Spec.Faults)
	}
	many := make([]simdevice.Fault, 0, 300)
	for i := range 300 {
		many = append(many, simdevice.Fault{Device: DeviceRef("0"), Node: fmt.Sprintf("node-%d", i), Mode: simdevice.FaultECC})
	}
	if _, err := Merge(p, many); err == nil || !strings.Contains(err.Error(), "spec.faults: Too many") {
		t.Fatalf("want the 256-fault limit, got %v", err)
	}
}

func TestKey(t *testing.T) {
	p := pool(simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: 2})
	a := Key(p, simdevice.Fault{Device: DeviceRef("1"), Node: "node-a"})
	if a == "" || a != Key(p, simdevice.Fault{Device: DeviceRef("gpu-1"), Node: "node-a", Mode: simdevice.FaultECC}) {
		t.Errorf("index 1 and gpu-1 on node-a have keys %q and %q", a, Key(p, simdevice.Fault{Device: DeviceRef("gpu-1"), Node: "node-a"}))
	}
	if a == Key(p, simdevice.Fault{Device: DeviceRef("1")}) || a == Key(p, simdevice.Fault{Device: DeviceRef("0"), Node: "node-a"}) {
		t.Error("another node or device has the same key")
	}
	if Key(p, simdevice.Fault{Device: DeviceRef("gpu-2")}) != "" {
		t.Error("a device the pool lacks has a key")
	}
}
