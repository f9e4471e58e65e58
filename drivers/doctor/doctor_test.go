package doctor

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/gpufabric"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/inventory"
	it "github.com/draforge/draforge/drivers/inventory/inventorytest"
	"github.com/draforge/draforge/drivers/simdevice"
)

func goodFacts() Facts {
	return Facts{
		ResourceAPI:   &APIFacts{Versions: []string{"v1", "v1beta2"}, V1Resources: []string{"deviceclasses", "resourceclaims", "resourceclaims/status", "resourceslices"}},
		ServerVersion: "v1.37.2",
		CRD:           &CRDFacts{Name: gvr.SimulatedDevicePoolCRD, Found: true, Established: true, ServedVersions: []string{"v1alpha1"}},
		Controller:    &ControllerFacts{URL: "http://127.0.0.1:8082", StatusCode: 200, Body: `{"status":"ready"}`},
		Features: &FeatureFacts{Gates: map[string]bool{"DRAConsumableCapacity": true, "GenericWorkload": false},
			Stages: map[string]string{"DRAConsumableCapacity": "BETA", "GenericWorkload": "BETA"}, APIs: []string{"resource.k8s.io/v1", "scheduling.k8s.io/v1"}},
	}
}

func result(t *testing.T, r *Report, id string) Result {
	t.Helper()
	for _, res := range r.Results {
		if res.ID == id {
			return res
		}
	}
	t.Fatalf("no result %s", id)
	return Result{}
}

func TestHealthyClusterPassesEverything(t *testing.T) {
	r := Run(it.Healthy(), goodFacts())
	for _, res := range r.Results {
		if res.Status != Pass {
			t.Errorf("%s %s: %s %s %v", res.ID, res.Name, res.Status, res.Message, res.Evidence)
		}
	}
	if r.Failed() || r.Summary[Pass] != len(Checks) {
		t.Errorf("summary %v", r.Summary)
	}
}

func TestEachCheckFails(t *testing.T) {
	cases := []struct {
		id     string
		want   Status
		facts  func(*Facts)
		breakS func(*inventory.Snapshot)
	}{
		{id: IDResourceAPI, want: Fail, facts: func(f *Facts) { f.ResourceAPI.Versions = []string{"v1beta1"}; f.ResourceAPI.V1Resources = nil }},
		{id: IDServerVersion, want: Fail, facts: func(f *Facts) { f.ServerVersion = "v1.33.4" }},
		{id: IDCRD, want: Fail, facts: func(f *Facts) { f.CRD = &CRDFacts{Name: gvr.SimulatedDevicePoolCRD} }},
		{id: IDCRD, want: Fail, facts: func(f *Facts) { f.CRD.Established = false; f.CRD.EstablishedMessage = "NamesAccepted=False" }},
		{id: IDController, want: Fail, facts: func(f *Facts) { f.Controller.StatusCode = 503 }},
		{id: IDController, want: Skip, facts: func(f *Facts) { f.Controller = nil }},
		{id: IDClassCEL, want: Fail, breakS: func(s *inventory.Snapshot) {
			s.Classes[0].Spec.Selectors[0].CEL.Expression = `device.driver ==`
		}},
		{id: IDPoolConsistency, want: Fail, breakS: func(s *inventory.Snapshot) {
			s.Slices[0].Spec.Pool.ResourceSliceCount = 2 // claims 2 slices, 1 exists
		}},
		{id: IDPoolConsistency, want: Warn, breakS: func(s *inventory.Snapshot) {
			old := s.Slices[0].DeepCopy()
			old.Name += "-old"
			s.Slices[0].Spec.Pool.Generation = 2
			s.Slices = append(s.Slices, old)
		}},
		{id: IDDuplicateDevices, want: Fail, breakS: func(s *inventory.Snapshot) {
			s.Slices[0].Spec.Devices[1].Name = s.Slices[0].Spec.Devices[0].Name
		}},
		{id: IDOrphanedClaims, want: Warn, breakS: func(s *inventory.Snapshot) {
			s.Claims[0].Status.ReservedFor = nil
			s.Pods = nil
			for _, sl := range s.Slices { // devices of a real driver, not simulated ones
				delete(sl.Labels, simdevice.LabelSDPUID)
			}
		}},
		{id: IDSliceNodes, want: Fail, breakS: func(s *inventory.Snapshot) { s.Nodes = s.Nodes[:1] }},
		{id: IDPodClaimRefs, want: Warn, breakS: func(s *inventory.Snapshot) { s.Claims = s.Claims[1:] }},
	}
	for _, c := range cases {
		t.Run(c.id+"-"+string(c.want), func(t *testing.T) {
			s, f := it.Healthy(), goodFacts()
			if c.facts != nil {
				c.facts(&f)
			}
			if c.breakS != nil {
				c.breakS(s)
			}
			r := Run(s, f)
			res := result(t, r, c.id)
			if res.Status != c.want {
				t.Fatalf("%s = %s (%s %v), want %s", c.id, res.Status, res.Message, res.Evidence, c.want)
			}
			if c.want == Fail && (res.Remediation == "" || !r.Failed()) {
				t.Errorf("a FAIL needs a remediation and fails the report: %+v", res)
			}
			for _, other := range r.Results {
				if other.ID != c.id && other.Status != Pass && !(c.id == IDController && other.ID == IDController) {
					// Breaking one thing may legitimately affect related checks; only log.
					t.Logf("also %s %s: %s", other.ID, other.Status, other.Message)
				}
			}
		})
	}
}

func TestOrphanCheckIgnoresPodsThatUseTheClaim(t *testing.T) {
	s := it.Healthy()
	// Allocated, not reserved, but an unscheduled pod references it: not an orphan (the
	// scheduler reserves it when it schedules the pod).
	s.Claims[0].Status.ReservedFor = nil
	s.Pods[0].Spec.NodeName = ""
	if res := result(t, Run(s, goodFacts()), IDOrphanedClaims); res.Status != Pass {
		t.Fatalf("got %s: %v", res.Status, res.Evidence)
	}
	// The owner pod of a template-generated claim counts too, whatever the claim's name.
	s.Pods[0].Spec.ResourceClaims = nil
	s.Claims[0].OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "worker", UID: s.Pods[0].UID, Controller: ptrTrue()}}
	if res := result(t, Run(s, goodFacts()), IDOrphanedClaims); res.Status != Pass {
		t.Fatalf("owner pod: got %s: %v", res.Status, res.Evidence)
	}
}

// TestOrphanCheckAcceptsStandaloneSimulatedClaims: the simulator exists to allocate claims no
// pod consumes; on simulated devices that is not an orphan.
func TestOrphanCheckAcceptsStandaloneSimulatedClaims(t *testing.T) {
	s := it.Healthy()
	s.Claims[0].Status.ReservedFor = nil
	s.Pods = nil
	res := result(t, Run(s, goodFacts()), IDOrphanedClaims)
	if res.Status != Pass || !strings.Contains(res.Message, "1 standalone claims allocated on simulated devices") {
		t.Fatalf("got %s: %s", res.Status, res.Message)
	}
}

func TestMissingSnapshotSkipsDataChecks(t *testing.T) {
	r := Run(nil, Facts{SnapshotError: "forbidden", ResourceAPI: &APIFacts{}})
	if res := result(t, r, IDPoolConsistency); res.Status != Skip {
		t.Fatalf("got %s", res.Status)
	}
	if res := result(t, r, IDResourceAPI); res.Status != Fail {
		t.Fatalf("no v1: got %s", res.Status)
	}
}

func ptrTrue() *bool { b := true; return &b }

// TestPodClaimRefsIgnoresTerminalPods: a pod that Succeeded or Failed, whose generated claim
// kube-controller-manager deleted as designed, raises no DRA010; the same missing claim of a
// Running (or phase-less, i.e. pending) pod still warns.
func TestPodClaimRefsIgnoresTerminalPods(t *testing.T) {
	for _, c := range []struct {
		phase corev1.PodPhase
		want  Status
	}{
		{corev1.PodSucceeded, Pass}, {corev1.PodFailed, Pass}, {corev1.PodRunning, Warn}, {"", Warn},
	} {
		s := it.Healthy()
		p := s.Pods[0]
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gen", ResourceClaimTemplateName: ptr.To("tpl")})
		p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: "gen", ResourceClaimName: ptr.To(p.Name + "-gen-x7k2")})
		p.Status.Phase = c.phase
		res := result(t, Run(s, goodFacts()), IDPodClaimRefs)
		if res.Status != c.want {
			t.Errorf("phase %q: %s %s %v, want %s", c.phase, res.Status, res.Message, res.Evidence, c.want)
		}
		if c.want == Warn && (len(res.Evidence) != 1 || !strings.Contains(res.Evidence[0], "generated claim "+p.Name+"-gen-x7k2")) {
			t.Errorf("phase %q: evidence %v", c.phase, res.Evidence)
		}
	}
}

// TestFeatures: the gates of interest (DRA*, workload scheduling) are read from
// kube-apiserver's kubernetes_feature_enabled lines and listed with their stage; an unreadable
// /metrics is a warning saying which permission is missing.
func TestFeatures(t *testing.T) {
	metrics := `# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="AnyVolumeDataSource",stage=""} 1
kubernetes_feature_enabled{name="DRAConsumableCapacity",stage="BETA"} 1
kubernetes_feature_enabled{name="DRAWorkloadResourceClaims",stage="BETA"} 0
kubernetes_feature_enabled{name="DynamicResourceAllocation",stage=""} 1
kubernetes_feature_enabled{name="GenericWorkload",stage="BETA"} 1
`
	gates, stages := parseFeatures(metrics)
	want := map[string]bool{"DRAConsumableCapacity": true, "DRAWorkloadResourceClaims": false, "DynamicResourceAllocation": true, "GenericWorkload": true}
	if !maps.Equal(gates, want) || stages["DRAWorkloadResourceClaims"] != "BETA" || stages["DynamicResourceAllocation"] != "" {
		t.Fatalf("gates %v stages %v, want %v", gates, stages, want)
	}
	f := goodFacts()
	f.Features = &FeatureFacts{Gates: gates, Stages: stages, APIs: []string{"resource.k8s.io/v1", "scheduling.k8s.io/v1alpha3"}}
	res := result(t, Run(it.Healthy(), f), IDFeatures)
	if res.Status != Pass || res.Message != "3 of 4 DRA and workload-scheduling gates on; 2 DRA and scheduling API versions served" ||
		!slices.Contains(res.Evidence, "gate DRAWorkloadResourceClaims=false (BETA)") || !slices.Contains(res.Evidence, "gate DynamicResourceAllocation=true (GA)") {
		t.Errorf("DRA011: %+v", res)
	}
	f.Features = &FeatureFacts{MetricsError: "forbidden"}
	if res := result(t, Run(it.Healthy(), f), IDFeatures); res.Status != Warn || !strings.Contains(res.Remediation, "/metrics") {
		t.Errorf("DRA011 without /metrics: %+v", res)
	}
}

// TestNodeAllocatable: a pool whose profile maps node-allocatable resources is a warning while
// kube-apiserver's DRANodeAllocatableResources gate is off (it drops the mapping), or unknown,
// and passes with the gate on; pools without such a profile always pass.
func TestNodeAllocatable(t *testing.T) {
	s := it.Healthy()
	f := goodFacts()
	if res := result(t, Run(s, f), IDNodeAllocatable); res.Status != Pass {
		t.Errorf("no mapping pool: %+v", res)
	}
	s.Pools = append(s.Pools, &simdevice.Pool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cpus"},
		Spec: simdevice.PoolSpec{Profile: simdevice.ProfileExampleCPU}})
	f.Features.Gates[gateNodeAllocatable] = false
	res := result(t, Run(s, f), IDNodeAllocatable)
	if res.Status != Warn || !slices.Contains(res.Evidence, "pool ns/cpus (profile example-cpu) maps node-allocatable resources") ||
		!strings.Contains(res.Message, "drops") {
		t.Errorf("gate off: %+v", res)
	}
	delete(f.Features.Gates, gateNodeAllocatable)
	if res := result(t, Run(s, f), IDNodeAllocatable); res.Status != Warn {
		t.Errorf("gate unknown: %+v", res)
	}
	f.Features.Gates[gateNodeAllocatable] = true
	if res := result(t, Run(s, f), IDNodeAllocatable); res.Status != Pass {
		t.Errorf("gate on: %+v", res)
	}
	f.Features = &FeatureFacts{MetricsError: "forbidden"}
	if res := result(t, Run(s, f), IDNodeAllocatable); res.Status != Skip {
		t.Errorf("gates not read: %+v", res)
	}
	if simdevice.MapsNodeAllocatable(simdevice.ProfileDRACPU) || !simdevice.MapsNodeAllocatable(simdevice.ProfileExampleCPU) {
		t.Error("dra-cpu publishes no mapping by default, example-cpu does")
	}
}

// TestHealthTaints: a driver health taint that keeps claims off a device warns, with what the
// taint means; informational ones (effect None) and DRAForge's own fault taints do not.
func TestHealthTaints(t *testing.T) {
	s := it.Healthy()
	s.Slices[0].Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: simdevice.TaintNvidiaXID, Value: "13", Effect: resourcev1.DeviceTaintEffectNone}}
	s.Slices[0].Spec.Devices[1].Taints = []resourcev1.DeviceTaint{{Key: simdevice.TaintUnhealthy, Value: "true", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	res := result(t, Run(s, goodFacts()), IDHealthTaints)
	if res.Status != Pass || !strings.Contains(res.Message, "1 informational") || len(res.Evidence) != 1 || !strings.Contains(res.Evidence[0], "Graphics Engine Exception") {
		t.Errorf("informational only: %+v", res)
	}
	s.Slices[1].Spec.Devices[1].Taints = []resourcev1.DeviceTaint{{Key: simdevice.TaintNvidiaXID, Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	res = result(t, Run(s, goodFacts()), IDHealthTaints)
	if res.Status != Warn || !strings.HasPrefix(res.Message, "1 driver health taints keep new claims off") || len(res.Evidence) != 2 ||
		!strings.Contains(strings.Join(res.Evidence, "\n"), "gpu.nvidia.com/xid=79:NoSchedule: NVIDIA driver health event: XID 79 (GPU has fallen off the bus)") ||
		!strings.Contains(res.Remediation, "--mode healthy") {
		t.Errorf("blocking: %+v", res)
	}
	// Many tainted devices: the first maxHealthEvidence are listed and the message says so.
	for i := range s.Slices {
		for j := range s.Slices[i].Spec.Devices {
			s.Slices[i].Spec.Devices[j].Taints = []resourcev1.DeviceTaint{{Key: simdevice.TaintNvidiaGPULost, Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
	}
	if n := len(s.Slices) * len(s.Slices[0].Spec.Devices); n <= maxHealthEvidence {
		for k := range maxHealthEvidence {
			d := s.Slices[0].Spec.Devices[0].DeepCopy()
			d.Name = fmt.Sprintf("extra-%d", k)
			s.Slices[0].Spec.Devices = append(s.Slices[0].Spec.Devices, *d)
		}
	}
	res = result(t, Run(s, goodFacts()), IDHealthTaints)
	if res.Status != Warn || len(res.Evidence) != maxHealthEvidence || !strings.Contains(res.Message, "(the first 20 listed)") {
		t.Errorf("capped: %s, %d evidence lines", res.Message, len(res.Evidence))
	}
}

// TestNVLinkCliques: a node whose clique label is gone while the annotation keeps it (its
// GPUs' fabric detached) is a warning; a labelled node, or one never in a clique, passes.
func TestNVLinkCliques(t *testing.T) {
	s := it.Healthy()
	f := goodFacts()
	if res := result(t, Run(s, f), IDNVLinkCliques); res.Status != Pass {
		t.Errorf("no clique: %+v", res)
	}
	const clique = "a1b2c3d4-e5f6-7890-abcd-ef1234567890.0"
	s.Nodes[0].Labels = map[string]string{gpufabric.CliqueLabel: clique}
	if res := result(t, Run(s, f), IDNVLinkCliques); res.Status != Pass {
		t.Errorf("in its clique: %+v", res)
	}
	s.Nodes[0].Labels = nil
	s.Nodes[0].Annotations = map[string]string{gpufabric.DetachedCliqueAnnotation: clique}
	res := result(t, Run(s, f), IDNVLinkCliques)
	want := "node " + s.Nodes[0].Name + " left clique " + clique + ": every GPU's NVLink fabric is detached"
	if res.Status != Warn || !slices.Contains(res.Evidence, want) || !strings.Contains(res.Remediation, "clear-faults") {
		t.Errorf("out of its clique: %+v", res)
	}
}
