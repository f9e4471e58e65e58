package doctor

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/client-go/discovery"

	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/simdevice"
)

// FeatureFacts are the DRA and workload-scheduling feature gates kube-apiserver reports in its
// kubernetes_feature_enabled metric, and the versions it serves of resource.k8s.io and
// scheduling.k8s.io.
type FeatureFacts struct {
	// Gates maps each gate of interest (see draGate) to whether it is on.
	Gates map[string]bool `json:"gates,omitempty"`
	// Stages are the gates' stages as the metric labels them (ALPHA, BETA, empty for GA).
	Stages map[string]string `json:"stages,omitempty"`
	// APIs are the served group versions of resource.k8s.io and scheduling.k8s.io.
	APIs []string `json:"apis,omitempty"`
	// MetricsError is set when /metrics could not be read (RBAC: nonResourceURLs /metrics).
	MetricsError string `json:"metricsError,omitempty"`
}

// workloadGates are the workload-scheduling gates doctor reports beside every DRA* gate.
var workloadGates = []string{"DynamicResourceAllocation", "GenericWorkload", "CompositePodGroup", "PodGroupPreemptionPolicy",
	"TopologyAwareWorkloadScheduling", "WorkloadWithJob", "ResourceHealthStatus", "ResourceHealthStatusMessage"}

func draGate(name string) bool {
	return strings.HasPrefix(name, "DRA") || slices.Contains(workloadGates, name)
}

var featureEnabled = regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{name="([^"]+)",stage="([^"]*)"\} ([01])$`)

// parseFeatures reads the gates of interest from kube-apiserver's /metrics text.
func parseFeatures(metrics string) (gates map[string]bool, stages map[string]string) {
	gates, stages = map[string]bool{}, map[string]string{}
	for _, m := range featureEnabled.FindAllStringSubmatch(metrics, -1) {
		if draGate(m[1]) {
			gates[m[1]], stages[m[1]] = m[3] == "1", m[2]
		}
	}
	return gates, stages
}

// gatherFeatures reads the gates from kube-apiserver's /metrics and the served API versions
// from groups (already discovered).
func gatherFeatures(ctx context.Context, d discovery.DiscoveryInterface, groups []string) *FeatureFacts {
	f := &FeatureFacts{APIs: groups}
	rc := d.RESTClient()
	if rc == nil {
		f.MetricsError = "no REST client to read /metrics"
		return f
	}
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		f.MetricsError = err.Error()
		return f
	}
	f.Gates, f.Stages = parseFeatures(string(raw))
	return f
}

func checkFeatures(_ *inventory.Snapshot, f *Facts) Result {
	ff := f.Features
	if ff == nil {
		return Result{Status: Skip, Message: "feature gates not collected"}
	}
	ev := []string{"API versions served: " + orNone(ff.APIs)}
	if ff.MetricsError != "" {
		return Result{Status: Warn, Message: "cannot read kube-apiserver's feature gates", Evidence: append(ev, "GET /metrics: "+ff.MetricsError),
			Remediation: "allow get on the nonResourceURL /metrics for this user (kube-apiserver reports its gates in kubernetes_feature_enabled)"}
	}
	var on []string
	for name, enabled := range ff.Gates {
		stage := ff.Stages[name]
		if stage == "" {
			stage = "GA"
		}
		ev = append(ev, fmt.Sprintf("gate %s=%v (%s)", name, enabled, stage))
		if enabled {
			on = append(on, name)
		}
	}
	return Result{Status: Pass, Message: fmt.Sprintf("%d of %d DRA and workload-scheduling gates on; %d DRA and scheduling API versions served",
		len(on), len(ff.Gates), len(ff.APIs)), Evidence: ev}
}

// gateNodeAllocatable is the gate without which kube-apiserver drops a ResourceSlice device's
// nodeAllocatableResources (alpha, off by default in 1.37).
const gateNodeAllocatable = "DRANodeAllocatableResources"

// checkNodeAllocatable warns about pools whose profile maps node-allocatable resources (a CPU
// driver's cpu) on a cluster whose API server drops the mapping: their slices are published
// without it, so kube-scheduler does not count their claims against the node's allocatable.
func checkNodeAllocatable(s *inventory.Snapshot, f *Facts) Result {
	ff := f.Features
	if ff == nil || ff.Gates == nil {
		return Result{Status: Skip, Message: "feature gates not collected"}
	}
	if s == nil {
		return Result{Status: Skip, Message: "cluster state not read"}
	}
	var ev []string
	for _, p := range s.Pools {
		if simdevice.MapsNodeAllocatable(p.Spec.Profile) {
			ev = append(ev, fmt.Sprintf("pool %s/%s (profile %s) maps node-allocatable resources", p.Namespace, p.Name, p.Spec.Profile))
		}
	}
	on, known := ff.Gates[gateNodeAllocatable]
	switch {
	case len(ev) == 0:
		return Result{Status: Pass, Message: "no pool maps node-allocatable resources"}
	case on:
		return Result{Status: Pass, Message: fmt.Sprintf("%d pools map node-allocatable resources; %s is on", len(ev), gateNodeAllocatable), Evidence: ev}
	case !known:
		return Result{Status: Warn, Message: fmt.Sprintf("%d pools map node-allocatable resources; kube-apiserver does not report %s", len(ev), gateNodeAllocatable), Evidence: ev,
			Remediation: "an API server without the gate drops nodeAllocatableResources from every ResourceSlice"}
	}
	return Result{Status: Warn, Message: fmt.Sprintf("%d pools map node-allocatable resources, which kube-apiserver drops (%s off)", len(ev), gateNodeAllocatable), Evidence: ev,
		Remediation: "their ResourceSlices are stored without nodeAllocatableResources, so kube-scheduler does not count their claims against the node's allocatable (DRAForge takes the stripped slices as published and does not rewrite them); to keep the mapping turn on " + gateNodeAllocatable + " in kube-apiserver and kube-scheduler (localcluster profile dra-all) and declare it on the nodes (SimulatedNodes declaredFeatures, as a kubelet with the gate does)"}
}
