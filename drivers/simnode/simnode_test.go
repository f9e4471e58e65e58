package simnode

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func decodeYAML(t *testing.T, src string) (Spec, error) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(src), &u.Object); err != nil {
		t.Fatal(err)
	}
	return Decode(u)
}

func TestDecodeAndExpand(t *testing.T) {
	s, err := decodeYAML(t, `
apiVersion: draforge.oaslananka/v1alpha1
kind: SimulatedNodes
metadata: {name: gpus}
spec:
  prefix: gpu-node
  count: 3
  start: 7
  labels: {gpu: h100}
  annotations: {team: ml}
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  allocatable: {cpu: 96, memory: 1Ti, nvidia.com/gpu: 8}
  leaseRenewInterval: 5s
  statusReportInterval: 1m
`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.NodeNames(), []string{"gpu-node-7", "gpu-node-8", "gpu-node-9"}; !slices.Equal(got, want) {
		t.Fatalf("names %v, want %v", got, want)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	nodes := s.Nodes(now)
	n := nodes[1]
	for k, v := range map[string]string{"gpu": "h100", LabelSimulated: "true", corev1.LabelHostname: "gpu-node-8", corev1.LabelOSStable: "linux"} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Annotations[AnnotationLeaseRenewInterval] != "5s" || n.Annotations[AnnotationStatusReportInterval] != "1m" || n.Annotations["team"] != "ml" {
		t.Errorf("annotations %v", n.Annotations)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "nvidia.com/gpu" || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taints %v", n.Spec.Taints)
	}
	a := n.Status.Allocatable
	if a.Cpu().String() != "96" || a.Memory().String() != "1Ti" || a.Pods().String() != "110" || a.Name("nvidia.com/gpu", "").String() != "8" {
		t.Errorf("allocatable %v (pods default 110)", a)
	}
	if !a[corev1.ResourceCPU].Equal(n.Status.Capacity[corev1.ResourceCPU]) {
		t.Errorf("capacity %v differs from allocatable", n.Status.Capacity)
	}
	var ready *corev1.NodeCondition
	for i, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = &n.Status.Conditions[i]
		} else if c.Status != corev1.ConditionFalse {
			t.Errorf("%s = %s, want False", c.Type, c.Status)
		}
	}
	if ready == nil || ready.Status != corev1.ConditionTrue || ready.Reason != "KubeletReady" || !ready.LastHeartbeatTime.Time.Equal(now.Truncate(time.Second)) {
		t.Errorf("Ready condition %+v", ready)
	}
}

func TestNamesAndDefaults(t *testing.T) {
	s, err := decodeYAML(t, `{spec: {prefix: node, names: [a, b]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.NodeNames(); !slices.Equal(got, []string{"node-a", "node-b"}) {
		t.Fatalf("names %v", got)
	}
	n := s.Nodes(time.Now())[0]
	if n.Status.Allocatable.Cpu().String() != "64" || n.Annotations != nil || n.Spec.Taints != nil {
		t.Errorf("defaults: allocatable %v, annotations %v, taints %v", n.Status.Allocatable, n.Annotations, n.Spec.Taints)
	}
	obj, status, err := applyObjects(n)
	if err != nil {
		t.Fatal(err)
	}
	// Without taints in the document the atomic taint list is not applied, so the admission
	// plugin's not-ready taint stays for the node lifecycle controller.
	if _, ok := obj.Object["spec"]; ok {
		t.Errorf("object apply carries a spec: %v", obj.Object["spec"])
	}
	if _, ok := obj.Object["status"]; ok {
		t.Error("object apply carries status")
	}
	if c, _, _ := unstructured.NestedSlice(status.Object, "status", "conditions"); len(c) != 4 {
		t.Errorf("status apply has %d conditions, want 4", len(c))
	}
}

// TestDecodeRejects: each bad spec is refused for its own reason (the prefix is "node": an
// unquoted n is a YAML boolean, which would make every case fail on the prefix alone).
func TestDecodeRejects(t *testing.T) {
	for name, c := range map[string]struct{ src, want string }{
		"both":               {`{spec: {prefix: node, count: 2, names: [a]}}`, "exactly one of count or names"},
		"neither":            {`{spec: {prefix: node}}`, "exactly one of count or names"},
		"no prefix":          {`{spec: {count: 1}}`, "prefix is required"},
		"quantity":           {`{spec: {prefix: node, count: 1, allocatable: {cpu: lots}}}`, "allocatable cpu"},
		"short renew":        {`{spec: {prefix: node, count: 1, leaseRenewInterval: 10ms}}`, `interval "10ms"`},
		"bad duration":       {`{spec: {prefix: node, count: 1, statusReportInterval: soon}}`, `interval "soon"`},
		"no spec":            {`{metadata: {name: x}}`, ""},
		"count type":         {`{spec: {prefix: node, count: "two"}}`, "cannot unmarshal string"},
		"too many":           {`{spec: {prefix: node, count: 10001}}`, "10001 nodes: at most 10000 per document"},
		"topology and names": {`{spec: {prefix: x, names: [a], topology: {levels: [{key: rack, count: 2}], nodesPerDomain: 1}}}`, "names may not be set"},
		"topology count":     {`{spec: {prefix: x, count: 3, topology: {levels: [{key: rack, count: 2}], nodesPerDomain: 1}}}`, "count 3: the topology lays out 2 nodes"},
		"topology too big":   {`{spec: {prefix: x, topology: {levels: [{key: a, count: 100}, {key: b, count: 100}], nodesPerDomain: 2}}}`, "more than 10000 nodes"},
		"topology overflow":  {`{spec: {prefix: x, topology: {levels: [{key: a, count: 4611686018427387904}], nodesPerDomain: 4}}}`, "want 1 to 10000"},
		"topology no levels": {`{spec: {prefix: x, topology: {levels: [], nodesPerDomain: 2}}}`, "0 levels"},
		"topology same key":  {`{spec: {prefix: x, topology: {levels: [{key: a, count: 1}, {key: a, count: 2}], nodesPerDomain: 2}}}`, "level a appears twice"},
		"feature name":       {`{spec: {prefix: node, count: 1, declaredFeatures: [draNodeAllocatableResources]}}`, `declared feature "draNodeAllocatableResources"`},
		"topology hostname":  {`{spec: {prefix: x, topology: {levels: [{key: kubernetes.io/hostname, count: 2}], nodesPerDomain: 2}}}`, "sets that label itself"},
	} {
		if _, err := decodeYAML(t, c.src); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
	if s, err := decodeYAML(t, `{spec: {prefix: node, count: 10000}}`); err != nil || s.Count != MaxNodes {
		t.Errorf("count 10000 (MaxNodes): %v", err)
	}
}

// A topology lays nodes out outermost level first; each node's value for a level names its
// domain among all domains of that level in the document.
func TestTopologyLabels(t *testing.T) {
	s, err := decodeYAML(t, `{spec: {prefix: gpu, start: 10, labels: {team: ml}, topology: {levels: [
		{key: topology.kubernetes.io/zone, count: 1},
		{key: cloud.google.com/gce-topology-block, count: 2, name: block},
		{key: topology.kubernetes.io/rack, count: 2},
		{key: nvidia.com/gpu.clique, count: 1}], nodesPerDomain: 3}}}`)
	if err != nil {
		t.Fatal(err)
	}
	nodes := s.Nodes(time.Unix(0, 0))
	if len(nodes) != 12 || nodes[0].Name != "gpu-10" || nodes[11].Name != "gpu-21" {
		t.Fatalf("%d nodes, first %s", len(nodes), nodes[0].Name)
	}
	for i, want := range map[int][4]string{
		0:  {"zone-0", "block-0", "rack-0", "gpu.clique-0"},
		2:  {"zone-0", "block-0", "rack-0", "gpu.clique-0"},
		3:  {"zone-0", "block-0", "rack-1", "gpu.clique-1"},
		6:  {"zone-0", "block-1", "rack-2", "gpu.clique-2"},
		11: {"zone-0", "block-1", "rack-3", "gpu.clique-3"},
	} {
		l := nodes[i].Labels
		got := [4]string{l["topology.kubernetes.io/zone"], l["cloud.google.com/gce-topology-block"], l["topology.kubernetes.io/rack"], l["nvidia.com/gpu.clique"]}
		if got != want || l["team"] != "ml" || l["kubernetes.io/hostname"] != nodes[i].Name {
			t.Errorf("node %d: %v (labels %v), want %v", i, got, l, want)
		}
	}
}

// Declared features go to status.declaredFeatures sorted and once each (the API refuses
// others); without them the field stays unset.
func TestDeclaredFeatures(t *testing.T) {
	s, err := decodeYAML(t, `{spec: {prefix: node, count: 1, declaredFeatures: [Zeta, DRANodeAllocatableResources, Zeta]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Nodes(time.Now())[0].Status.DeclaredFeatures; !slices.Equal(got, []string{"DRANodeAllocatableResources", "Zeta"}) {
		t.Errorf("declaredFeatures %v", got)
	}
	s.DeclaredFeatures = nil
	if got := s.Nodes(time.Now())[0].Status.DeclaredFeatures; got != nil {
		t.Errorf("no features declared: %v", got)
	}
}
