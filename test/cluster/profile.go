package cluster

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// A Profile is a named set of feature gates and API versions the local control plane turns on
// beyond Kubernetes' defaults: the gates go to kube-apiserver, kube-scheduler and
// kube-controller-manager alike, the API versions to kube-apiserver's --runtime-config.
type Profile struct {
	Name string
	// Doc says what the profile is for (localcluster lists it).
	Doc   string
	Gates []Gate
	APIs  []API
	// Controllers are the kube-controller-manager controllers the profile's gates bring, run
	// beside Controllers.
	Controllers []string
	// Kueue runs Kueue (KueueVersion) beside the control plane once it is up: its CRDs, its
	// manager with KueueDeviceMappings and its webhooks on loopback.
	Kueue bool
}

// Gate is a feature gate turned on, with the KEP it belongs to and its stage in the release.
type Gate struct {
	Name, KEP, Stage string
}

// API is a group version kube-apiserver serves only when asked (alpha and beta APIs are off by
// default), with the KEPs whose objects it carries.
type API struct {
	GroupVersion, KEPs string
}

// Profiles are the profiles of Kubernetes v1.37.2 (the version the control plane builds). The
// gates and stages are the ones v1.37.2's binaries list under --feature-gates (pkg/features/
// kube_features.go), the API versions the ones pkg/controlplane/instance.go disables by default.
// Not in 1.37.2, so in no profile: a GangScheduling gate (gangs come with GenericWorkload) and
// scheduling.k8s.io/v1alpha2 (1.37 serves PodGroups as v1alpha3 and v1beta1).
var Profiles = []Profile{
	{Name: "default", Doc: "Kubernetes v1.37.2's defaults: GA and on-by-default beta features, stable APIs"},
	{
		Name: "dra-all",
		Doc:  "every DRA and workload-scheduling gate of v1.37.2 that is off by default, and their alpha and beta API versions",
		Gates: []Gate{
			{"DRAWorkloadResourceClaims", "5729", "beta"},
			{"GenericWorkload", "4671", "beta"},
			{"TopologyAwareWorkloadScheduling", "5732", "alpha"},
			{"CompositePodGroup", "6012", "alpha"},
			{"PodGroupPreemptionPolicy", "5710", "alpha"},
			{"WorkloadWithJob", "5547", "alpha"},
			{"DRAFractionalCapacityRange", "5075", "beta"},
			{"DRANodeAllocatableResources", "5517", "alpha"},
			{"DRAListTypeAttributes", "5491", "alpha"},
			{"DRAResourcePoolStatus", "5677", "alpha"},
			{"DRAPartitionableDevicesType", "5677", "alpha"},
			{"DRAOptionalNodeOperations", "5945", "alpha"},
			{"DRADeviceCompatibilityGroups", "5963", "alpha"},
			{"DRADerivedAttributes", "6080", "alpha"},
		},
		APIs: []API{
			{"resource.k8s.io/v1beta1", "4381"},
			{"resource.k8s.io/v1beta2", "4381, 5055"},
			{"resource.k8s.io/v1alpha3", "5055, 5677"},
			{"scheduling.k8s.io/v1beta1", "4671, 5729"},
			{"scheduling.k8s.io/v1alpha3", "4671, 6012"},
		},
		// Removes a PodGroup's scheduling.k8s.io/podgroup-protection finalizer once no pod of
		// the group runs; without it a deleted PodGroup, and the claims it owns, stay.
		Controllers: []string{"podgroup-protection-controller"},
	},
	{
		Name:  "kueue",
		Doc:   "Kubernetes v1.37.2's defaults and Kueue " + KueueVersion + " (batch/job integration, DeviceClasses counted by quota as draforge.oaslananka/gpu)",
		Kueue: true,
	},
}

// ProfileNamed returns the profile called name ("" is default); an unknown name is an error
// listing the known ones.
func ProfileNamed(name string) (Profile, error) {
	if name == "" {
		name = "default"
	}
	i := slices.IndexFunc(Profiles, func(p Profile) bool { return p.Name == name })
	if i < 0 {
		var known []string
		for _, p := range Profiles {
			known = append(known, p.Name)
		}
		return Profile{}, fmt.Errorf("unknown control plane profile %q (known: %s)", name, strings.Join(known, ", "))
	}
	return Profiles[i], nil
}

// args are the flags c takes for the profile: --feature-gates for the three Kubernetes
// components, --runtime-config for kube-apiserver; none for etcd or a profile without gates.
func (p Profile) args(c Component) []string {
	var out []string
	if len(p.Gates) > 0 && (c == APIServer || c == Scheduler || c == ControllerManager) {
		gates := make([]string, 0, len(p.Gates))
		for _, g := range p.Gates {
			gates = append(gates, g.Name+"=true")
		}
		sort.Strings(gates)
		out = append(out, "--feature-gates="+strings.Join(gates, ","))
	}
	if len(p.APIs) > 0 && c == APIServer {
		apis := make([]string, 0, len(p.APIs))
		for _, a := range p.APIs {
			apis = append(apis, a.GroupVersion+"=true")
		}
		out = append(out, "--runtime-config="+strings.Join(apis, ","))
	}
	return out
}
