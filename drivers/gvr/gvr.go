// Package gvr names the Kubernetes resources that drivers, serve, scenario and the tests share,
// so each GroupVersionResource is written once. It imports only apimachinery's schema package.
// The machine files (machines/*.cue) name the same resources in CUE; a test in drivers checks
// they are among these.
package gvr

import "k8s.io/apimachinery/pkg/runtime/schema"

// The SimulatedDevicePool API (deploy/crds/simulateddevicepool-crd.yaml).
const (
	DRAForgeGroup              = "draforge.oaslananka"
	SimulatedDevicePoolVersion = "v1alpha1"
	// SimulatedDevicePoolCRD is the name of the SimulatedDevicePool CustomResourceDefinition.
	SimulatedDevicePoolCRD = "simulateddevicepools." + DRAForgeGroup
)

var (
	SimulatedDevicePools = schema.GroupVersionResource{Group: DRAForgeGroup, Version: SimulatedDevicePoolVersion, Resource: "simulateddevicepools"}

	// resource.k8s.io/v1 (DRA).
	ResourceSlices = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}
	DeviceClasses  = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"}
	ResourceClaims = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}
	// DeviceTaintRules taint devices like the drivers' own taints (GA in 1.37).
	DeviceTaintRules = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"}
	// PodGroups are Kubernetes 1.37's gangs (GenericWorkload), served only with
	// scheduling.k8s.io/v1beta1 turned on.
	PodGroups = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}

	// ResourceClaimTemplates: the compute-domain machine writes a ComputeDomain's workload template.
	ResourceClaimTemplates = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"}
	// ComputeDomains are NVIDIA's multi-node NVLink domains (the compute-domain driver's CRD,
	// deploy/crds/nvidia), served only where that CRD is installed.
	ComputeDomains = schema.GroupVersionResource{Group: "resource.nvidia.com", Version: "v1beta1", Resource: "computedomains"}

	// Core v1.
	Nodes      = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	Pods       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	Namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

	CustomResourceDefinitions = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

	// Leases in kube-node-lease: the node machine's heartbeats.
	Leases = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
)

// All is every resource above, for checks that a resource named elsewhere is a shared one.
var All = []schema.GroupVersionResource{
	SimulatedDevicePools, ResourceSlices, DeviceClasses, ResourceClaims, DeviceTaintRules, PodGroups, Nodes, Pods, Namespaces, CustomResourceDefinitions, Leases,
	ResourceClaimTemplates, ComputeDomains,
}
