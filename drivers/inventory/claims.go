package inventory

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/allocator"
)

// Claim states (ClaimView.State).
const (
	ClaimPending   = "Pending"
	ClaimAllocated = "Allocated" // allocated, not reserved for any consumer
	ClaimReserved  = "Reserved"  // allocated and reserved for at least one consumer
	ClaimDeleting  = "Deleting"
)

// ClaimView is a ResourceClaim with its requests, allocation and consumers.
type ClaimView struct {
	Namespace   string           `json:"namespace"`
	Name        string           `json:"name"`
	State       string           `json:"state"`
	Requests    []RequestView    `json:"requests"`
	Allocations []AllocationView `json:"allocations,omitempty"`
	// Node is where the allocation is usable, when it is bound to one node.
	Node string `json:"node,omitempty"`
	// ReservedFor lists status.reservedFor as "resource/name".
	ReservedFor []string `json:"reservedFor,omitempty"`
	// Pods are the pods in the snapshot that use the claim: by spec.resourceClaims,
	// status.resourceClaimStatuses, or as the claim's controlling owner. Never guessed from names.
	// The claim's allocation pod is not one of them (see AllocationPod).
	Pods []string `json:"pods,omitempty"`
	// AllocationPod is the pod through which kube-scheduler allocates this standalone claim
	// (controller --allocator kube-scheduler) while it exists, with kube-scheduler's
	// PodScheduled=False message when it could not place it.
	AllocationPod *AllocationPodView `json:"allocationPod,omitempty"`
}

// AllocationPodView is a claim's allocation pod.
type AllocationPodView struct {
	Name string `json:"name"`
	// Unschedulable is kube-scheduler's PodScheduled=False reason and message.
	Unschedulable string `json:"unschedulable,omitempty"`
}

// RequestView is one request; Alternatives has one entry for exactly, several for firstAvailable.
type RequestView struct {
	Name         string            `json:"name"`
	Mode         string            `json:"mode"` // Exactly or FirstAvailable
	Alternatives []AlternativeView `json:"alternatives"`
}

// AlternativeView is an exact request or one firstAvailable subrequest.
type AlternativeView struct {
	Name            string `json:"name"`
	DeviceClassName string `json:"deviceClassName"`
	AllocationMode  string `json:"allocationMode"`
	Count           int64  `json:"count,omitempty"`
	Selectors       int    `json:"selectors,omitempty"`
}

// AllocationView is one allocated device.
type AllocationView struct {
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
}

func (a AllocationView) String() string {
	return fmt.Sprintf("%s=%s/%s/%s", a.Request, a.Driver, a.Pool, a.Device)
}

// Requests describes a claim's requests.
func Requests(c *resourcev1.ResourceClaim) []RequestView {
	var out []RequestView
	for _, r := range c.Spec.Devices.Requests {
		rv := RequestView{Name: r.Name}
		switch {
		case r.Exactly != nil:
			rv.Mode = "Exactly"
			rv.Alternatives = append(rv.Alternatives, alt(r.Name, r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count, len(r.Exactly.Selectors)))
		case len(r.FirstAvailable) > 0:
			rv.Mode = "FirstAvailable"
			for _, s := range r.FirstAvailable {
				rv.Alternatives = append(rv.Alternatives, alt(r.Name+"/"+s.Name, s.DeviceClassName, s.AllocationMode, s.Count, len(s.Selectors)))
			}
		default:
			rv.Mode = "Unknown"
		}
		out = append(out, rv)
	}
	return out
}

func alt(name, class string, mode resourcev1.DeviceAllocationMode, count int64, selectors int) AlternativeView {
	if mode == "" {
		mode = resourcev1.DeviceAllocationModeExactCount
	}
	if mode == resourcev1.DeviceAllocationModeExactCount && count == 0 {
		count = 1
	}
	if mode == resourcev1.DeviceAllocationModeAll {
		count = 0
	}
	return AlternativeView{Name: name, DeviceClassName: class, AllocationMode: string(mode), Count: count, Selectors: selectors}
}

// AllocationNode returns the single node an allocation is bound to (its node selector names
// one node by metadata.name, or its devices come from slices of one node), or "".
func AllocationNode(s *Snapshot, a *resourcev1.AllocationResult) string {
	if a == nil {
		return ""
	}
	if ns := a.NodeSelector; ns != nil && len(ns.NodeSelectorTerms) == 1 {
		t := ns.NodeSelectorTerms[0]
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	nodes := map[string]bool{}
	for _, r := range a.Devices.Results {
		for _, sl := range s.Slices {
			if sl.Spec.Driver == r.Driver && sl.Spec.Pool.Name == r.Pool {
				nodes[ptr.Deref(sl.Spec.NodeName, "")] = true
			}
		}
	}
	if len(nodes) == 1 {
		for n := range nodes {
			return n
		}
	}
	return ""
}

// ClaimPods returns the sorted names of the snapshot's pods that use the claim, without
// allocation pods (the controller's plumbing, never run).
func ClaimPods(s *Snapshot, c *resourcev1.ResourceClaim) []string {
	var out []string
	for _, p := range s.Pods {
		if allocator.PodReferencesClaim(p, c) && !allocationpod.Is(p) {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Claim describes one claim.
func Claim(s *Snapshot, c *resourcev1.ResourceClaim) ClaimView {
	cv := ClaimView{Namespace: c.Namespace, Name: c.Name, Requests: Requests(c), Pods: ClaimPods(s, c), AllocationPod: allocationPodOf(s, c)}
	for _, r := range c.Status.ReservedFor {
		cv.ReservedFor = append(cv.ReservedFor, r.Resource+"/"+r.Name)
	}
	if a := c.Status.Allocation; a != nil {
		for _, r := range a.Devices.Results {
			cv.Allocations = append(cv.Allocations, AllocationView{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device})
		}
		slices.SortFunc(cv.Allocations, func(x, y AllocationView) int {
			return cmp.Or(cmp.Compare(x.Request, y.Request), cmp.Compare(x.Driver, y.Driver), cmp.Compare(x.Pool, y.Pool), compareNatural(x.Device, y.Device))
		})
		cv.Node = AllocationNode(s, a)
	}
	switch {
	case c.DeletionTimestamp != nil:
		cv.State = ClaimDeleting
	case c.Status.Allocation == nil:
		cv.State = ClaimPending
	case len(c.Status.ReservedFor) > 0:
		cv.State = ClaimReserved
	default:
		cv.State = ClaimAllocated
	}
	return cv
}

// allocationPodOf returns the claim's allocation pod in the snapshot, nil when there is none.
func allocationPodOf(s *Snapshot, c *resourcev1.ResourceClaim) *AllocationPodView {
	for _, p := range s.Pods {
		if !allocationpod.Of(p, c) {
			continue
		}
		v := &AllocationPodView{Name: p.Name}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				v.Unschedulable = strings.TrimSpace(cond.Reason + ": " + cond.Message)
			}
		}
		return v
	}
	return nil
}

// Claims describes every claim of the snapshot, sorted by namespace and name.
func Claims(s *Snapshot) []ClaimView {
	out := make([]ClaimView, 0, len(s.Claims))
	for _, c := range s.Claims {
		out = append(out, Claim(s, c))
	}
	slices.SortFunc(out, func(x, y ClaimView) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	return out
}
