package simdevice

import "time"

// NVLinkFabric counts the NVIDIA GPUs the pool has on node, as NVML enumerates them (a device
// that disappeared is not there), and those whose NVLink fabric is attached (no fabric-detached
// fault on that node by now). Pools of other drivers have none. GPU Feature Discovery labels a node's
// NVLink clique only from attached GPUs (NVIDIA/k8s-device-plugin internal/lm/imex.go
// getFabricIDs, go-nvlib IsFabricAttached), so a node whose GPUs are all detached has no clique.
// The pool must be valid.
func (p *Pool) NVLinkFabric(node string, now time.Time) (gpus, attached int) {
	s := &p.Spec
	if profiles[s.Profile].driver != NvidiaDriverName || len(s.DeviceGroups) > 0 {
		return 0, 0
	}
	gone := make([]bool, s.DeviceCount)
	detached := make([]bool, s.DeviceCount)
	for _, f := range append(s.CampaignFaults(node, p.Elapsed(now)), s.Faults...) {
		if f.Node != "" && f.Node != node {
			continue
		}
		ref, err := s.faultTarget(f.Device)
		if err != nil || ref.index >= s.DeviceCount {
			continue
		}
		switch f.Mode {
		case FaultDisappear:
			gone[ref.index] = true
		case FaultFabricDetached:
			detached[ref.index] = true
		}
	}
	for i := range s.DeviceCount {
		if gone[i] {
			continue
		}
		gpus++
		if !detached[i] {
			attached++
		}
	}
	return gpus, attached
}
