// Package inventory holds Snapshot, one consistent-enough read of everything DRAForge diagnoses
// (SimulatedDevicePools, ResourceSlices, DeviceClasses, ResourceClaims, Pods, Nodes), and the
// pure views derived from it (pools, devices, claims). The CLI fills a Snapshot by listing from
// the API server (List); a long-running server can fill it from informer caches instead. Every
// other diagnostics package (resourcegraph, doctor, explain) takes a Snapshot, never a client.
package inventory

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/draforge/draforge/drivers/simdevice"
)

// Snapshot is a set of typed objects. Cluster-scoped lists (Slices, Classes, Nodes) are always
// complete; namespaced lists (Pools, Claims, Pods) may be limited to Namespace.
type Snapshot struct {
	// Namespace is the namespace the namespaced lists are limited to; "" means all namespaces.
	Namespace string `json:"namespace,omitempty"`

	Pools   []*simdevice.Pool           `json:"simulatedDevicePools"`
	Slices  []*resourcev1.ResourceSlice `json:"resourceSlices"`
	Classes []*resourcev1.DeviceClass   `json:"deviceClasses"`
	Claims  []*resourcev1.ResourceClaim `json:"resourceClaims"`
	Pods    []*corev1.Pod               `json:"pods"`
	Nodes   []*corev1.Node              `json:"nodes"`
	// TaintRules are the DeviceTaintRules: they taint devices for allocation and explain.
	TaintRules []*resourcev1.DeviceTaintRule `json:"deviceTaintRules,omitempty"`
	// PodGroups are the scheduling.k8s.io/v1beta1 PodGroups (gangs); empty where the cluster
	// does not serve them. PodGroupsRead says whether they were read at all (serve's snapshot
	// does not read them yet; a reader may not be allowed to): without it a pod's missing
	// PodGroup says nothing.
	PodGroups     []*schedulingv1beta1.PodGroup `json:"podGroups,omitempty"`
	PodGroupsRead bool                          `json:"podGroupsRead,omitempty"`

	// Warnings are lists that could not be read (for example the SimulatedDevicePool CRD is not
	// installed); the corresponding list is empty.
	Warnings []string `json:"warnings,omitempty"`
}

func byNsName[T interface {
	GetNamespace() string
	GetName() string
}](a, b T) int {
	return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
}

// Sort orders every list by namespace and name, so everything derived from the snapshot is
// deterministic. It sorts in place and returns s.
func (s *Snapshot) Sort() *Snapshot {
	slices.SortFunc(s.Pools, byNsName[*simdevice.Pool])
	slices.SortFunc(s.Slices, byNsName[*resourcev1.ResourceSlice])
	slices.SortFunc(s.Classes, byNsName[*resourcev1.DeviceClass])
	slices.SortFunc(s.PodGroups, byNsName[*schedulingv1beta1.PodGroup])
	slices.SortFunc(s.TaintRules, byNsName[*resourcev1.DeviceTaintRule])
	slices.SortFunc(s.Claims, byNsName[*resourcev1.ResourceClaim])
	slices.SortFunc(s.Pods, byNsName[*corev1.Pod])
	slices.SortFunc(s.Nodes, byNsName[*corev1.Node])
	slices.Sort(s.Warnings)
	return s
}

// InNamespace reports whether a namespaced object in ns belongs to the snapshot's scope.
func (s *Snapshot) InNamespace(ns string) bool { return s.Namespace == "" || s.Namespace == ns }

// Claim returns the claim namespace/name, or nil.
func (s *Snapshot) Claim(namespace, name string) *resourcev1.ResourceClaim {
	for _, c := range s.Claims {
		if c.Namespace == namespace && c.Name == name {
			return c
		}
	}
	return nil
}

// Node returns the named node, or nil.
func (s *Snapshot) Node(name string) *corev1.Node {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Class returns the named DeviceClass, or nil.
func (s *Snapshot) Class(name string) *resourcev1.DeviceClass {
	for _, c := range s.Classes {
		if c.Name == name {
			return c
		}
	}
	return nil
}
