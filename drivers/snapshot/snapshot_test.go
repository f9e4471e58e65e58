package snapshot

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/scenario"
	"github.com/draforge/draforge/drivers/simnode"
)

func node(name string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
	l := map[string]string{corev1.LabelHostname: name, simnode.LabelSimulated: "true"}
	for k, v := range labels {
		l[k] = v
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
}

func testCluster() Cluster {
	now := metav1.Now()
	gpu := node("ip-10-0-0-2.ec2.internal", map[string]string{"gpu": "h100", "kubernetes.io/arch": "arm64"})
	gpu2 := node("ip-10-0-0-1.ec2.internal", map[string]string{"gpu": "h100", "kubernetes.io/arch": "arm64"},
		corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
	cpu := node("cpu-0", nil, corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now})
	slice := func(name, node, pool string) resourcev1.ResourceSlice {
		return resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"owner": "x"}, ResourceVersion: "7"},
			Spec: resourcev1.ResourceSliceSpec{
				Driver: "gpu.nvidia.com", NodeName: ptr.To(node),
				Pool:    resourcev1.ResourcePool{Name: pool, Generation: 3, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": {StringValue: ptr.To("H100")}, "ecc": {BoolValue: ptr.To(true)}, "index": {IntValue: ptr.To[int64](0)}, "driverVersion": {VersionValue: ptr.To("1.2.3")}}}},
			},
		}
	}
	net := resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "fabric"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: "net.example.com", PerDeviceNodeSelection: ptr.To(true),
			Pool: resourcev1.ResourcePool{Name: "fabric", ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "nic-0", NodeName: ptr.To("ip-10-0-0-1.ec2.internal")}, {Name: "nic-1", NodeSelector: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"ip-10-0-0-2.ec2.internal"}}}}},
			}}},
		},
	}
	return Cluster{
		Nodes: []corev1.Node{gpu, cpu, gpu2},
		Slices: []resourcev1.ResourceSlice{
			slice("b-slice", "ip-10-0-0-2.ec2.internal", "team-a/pool/ip-10-0-0-2.ec2.internal"),
			slice("a-slice", "ip-10-0-0-1.ec2.internal", "ip-10-0-0-1.ec2.internal"), net,
		},
		Classes: []resourcev1.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com"`}}}}}},
		TaintRules: []resourcev1.DeviceTaintRule{{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.nvidia.com"), Pool: ptr.To("team-a/pool/ip-10-0-0-2.ec2.internal"), Device: ptr.To("gpu-0")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoExecute, TimeAdded: &now},
		}}},
		Namespaces: []string{"default", "team-a"},
	}
}

func write(t *testing.T, c Cluster, o Options) string {
	t.Helper()
	docs, _, err := Documents(c, o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, "test snapshot", docs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The documents are a valid scenario (the CUE schema and the scenario decoder), in apply
// order, and hold what reproduces the cluster.
func TestDocumentsAreAScenario(t *testing.T) {
	out := write(t, testCluster(), Options{})
	if err := scenario.Vet("snapshot.yaml", []byte(out)); err != nil {
		t.Fatalf("the snapshot is not a valid scenario: %s\n%s", scenario.Format("snapshot.yaml", err), out)
	}
	objs, err := scenario.Decode("snapshot.yaml", []byte(out), "default")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.Kind.Kind+" "+o.Obj.GetName())
	}
	want := []string{"SimulatedNodes nodes-0", "SimulatedNodes nodes-1", "DeviceClass gpu.nvidia.com",
		"ResourceSlice a-slice", "ResourceSlice b-slice", "ResourceSlice fabric", "DeviceTaintRule broken"}
	if !slices.Equal(kinds, want) {
		t.Errorf("documents %q, want %q", kinds, want)
	}
	// Two groups: the GPU nodes differ only in their names (and a condition taint), the CPU
	// node has a taint of its own; names are whole names, the node's own labels are left out.
	spec0, _ := simnode.Decode(objs[0].Obj)
	spec1, _ := simnode.Decode(objs[1].Obj)
	if !slices.Equal(spec0.NodeNames(), []string{"cpu-0"}) || len(spec0.Taints) != 1 || spec0.Taints[0].TimeAdded != nil {
		t.Errorf("cpu group %+v", spec0)
	}
	if !slices.Equal(spec1.NodeNames(), []string{"ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal"}) || len(spec1.Taints) != 0 ||
		spec1.Labels["gpu"] != "h100" || spec1.Labels[corev1.LabelHostname] != "" || spec1.Labels[simnode.LabelSimulated] != "" || spec1.Allocatable["cpu"] != "96" {
		t.Errorf("gpu group %+v", spec1)
	}
	// A node made from it keeps its architecture.
	if n := spec1.Nodes(metav1.Now().Time)[0]; n.Labels[corev1.LabelArchStable] != "arm64" || n.Status.NodeInfo.Architecture != "arm64" || n.Name != "ip-10-0-0-1.ec2.internal" {
		t.Errorf("node %s labels %v arch %s", n.Name, n.Labels, n.Status.NodeInfo.Architecture)
	}
	for _, s := range []string{"generation: 3", "productName:", "perDeviceNodeSelection: true", "key: example.com/broken"} {
		if !strings.Contains(out, s) {
			t.Errorf("snapshot lacks %q:\n%s", s, out)
		}
	}
	for _, s := range []string{"resourceVersion", "owner: x", "timeAdded", "node.alpha.kubernetes.io/ttl", "not-ready"} {
		if strings.Contains(out, s) {
			t.Errorf("snapshot holds %q, which is the cluster's bookkeeping:\n%s", s, out)
		}
	}
}

// Equal clusters give equal documents, whatever order the lists came in.
func TestDocumentsAreDeterministic(t *testing.T) {
	c := testCluster()
	a := write(t, c, Options{Anonymize: true})
	slices.Reverse(c.Nodes)
	slices.Reverse(c.Slices)
	slices.Reverse(c.Namespaces)
	if b := write(t, c, Options{Anonymize: true}); a != b {
		t.Errorf("order changed the snapshot:\n%s\n---- vs ----\n%s", a, b)
	}
}

// Anonymized, no node or namespace name is left, and each is renamed the same everywhere.
func TestAnonymizeRenamesConsistently(t *testing.T) {
	out := write(t, testCluster(), Options{Anonymize: true})
	for _, s := range []string{"ip-10-0-0", "cpu-0", "team-a", "a-slice", "b-slice"} {
		if strings.Contains(out, s) {
			t.Errorf("anonymized snapshot still names %q:\n%s", s, out)
		}
	}
	// Sorted originals: cpu-0 → node-0, ip-10-0-0-1 → node-1, ip-10-0-0-2 → node-2;
	// default → ns-0, team-a → ns-1.
	for _, s := range []string{"names:\n  - node-1\n  - node-2", "nodeName: node-2", "name: ns-1/pool/node-2", "pool: ns-1/pool/node-2",
		"name: node-1\n", "nodeName: node-1", "- node-2\n", "name: slice-0"} {
		if !strings.Contains(out, s) {
			t.Errorf("anonymized snapshot lacks %q:\n%s", s, out)
		}
	}
	if err := scenario.Vet("snapshot.yaml", []byte(out)); err != nil {
		t.Fatalf("the anonymized snapshot is not a valid scenario: %s", scenario.Format("snapshot.yaml", err))
	}
}
