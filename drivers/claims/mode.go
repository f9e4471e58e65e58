package claims

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/engine"
)

// Mode says who allocates standalone claims (the controller's --allocator).
type Mode string

const (
	// KubeScheduler (the default): kube-scheduler allocates every claim; a standalone claim
	// gets an allocation pod for it to schedule, so one allocator, with one in-flight record,
	// decides every device.
	KubeScheduler Mode = "kube-scheduler"
	// Simulator: the simulator's own copy of the structured allocator allocates standalone
	// claims, for control planes without kube-scheduler. With kube-scheduler running the two
	// allocators do not see each other's in-flight devices and may pick the same device.
	Simulator Mode = "simulator"
)

// Modes are the valid --allocator values, the default first.
var Modes = []Mode{KubeScheduler, Simulator}

// ParseMode validates an --allocator value.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("--allocator %q: want %s or %s", s, KubeScheduler, Simulator)
}

// NeedsAllocation is the fact behind claimNeedsSimulatedAllocation (want Simulator) and
// claimNeedsAllocationPod (want KubeScheduler): it holds when the controller runs in mode want
// and the claim is standalone and waiting for devices (allocator.ClaimNeedsSimulatedAllocation:
// not allocated, not being deleted, not generated for a pod, no unscheduled pod but its own
// allocation pod uses it).
func NeedsAllocation(want, mode Mode, claim *resourcev1.ResourceClaim, pods []*corev1.Pod) engine.Fact {
	if mode != want {
		return engine.Fact{Message: "--allocator " + string(mode)}
	}
	if !allocator.ClaimNeedsSimulatedAllocation(claim, pods) {
		return engine.Fact{Message: "allocated, being deleted, or used by a pod kube-scheduler schedules"}
	}
	return engine.Holds(true)
}
