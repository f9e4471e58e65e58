package inventory

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/allocator"
)

// PodView is a pod that uses ResourceClaims, with the devices its claims hold.
type PodView struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	Node      string `json:"node,omitempty"`
	// Claims are the pod's ResourceClaims that exist in the snapshot (direct or generated).
	Claims []string `json:"claims,omitempty"`
	// PendingClaims counts claims that are not allocated yet.
	PendingClaims int `json:"pendingClaims"`
	// Unschedulable is the scheduler's PodScheduled=False message, when there is one.
	Unschedulable string          `json:"unschedulable,omitempty"`
	Devices       []PodDeviceView `json:"devices,omitempty"`
}

// PodDeviceView is one device held by one of a pod's claims.
type PodDeviceView struct {
	Claim   string `json:"claim"`
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	Node    string `json:"node,omitempty"`
}

// Pods describes the snapshot's pods that have spec.resourceClaims (the others hold no DRA
// devices), in snapshot order (namespace, name). Allocation pods are left out: they are the
// controller's way of asking kube-scheduler to allocate a standalone claim, never run, and show
// on their claim instead (ClaimView.AllocationPod).
func Pods(s *Snapshot) []PodView {
	byNs := map[string][]int{} // claims per namespace, by index
	for i, c := range s.Claims {
		byNs[c.Namespace] = append(byNs[c.Namespace], i)
	}
	out := []PodView{}
	for _, p := range s.Pods {
		if len(p.Spec.ResourceClaims) == 0 || allocationpod.Is(p) {
			continue
		}
		pv := PodView{Namespace: p.Namespace, Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName}
		if pv.Phase == "" {
			pv.Phase = string(corev1.PodPending)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				pv.Unschedulable = c.Message
			}
		}
		for _, i := range byNs[p.Namespace] {
			c := s.Claims[i]
			if !allocator.PodReferencesClaim(p, c) {
				continue
			}
			pv.Claims = append(pv.Claims, c.Name)
			if c.Status.Allocation == nil {
				pv.PendingClaims++
				continue
			}
			node := AllocationNode(s, c.Status.Allocation)
			for _, r := range c.Status.Allocation.Devices.Results {
				pv.Devices = append(pv.Devices, PodDeviceView{Claim: c.Name, Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device, Node: node})
			}
		}
		out = append(out, pv)
	}
	return out
}
