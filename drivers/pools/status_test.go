package pools

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/draforge/draforge/drivers/simdevice"
)

// A pool on more nodes than status.nodes may list shows the first MaxStatusNodes by name and
// counts them all; a smaller one lists every node in plan order.
func TestSetNodesCapsTheList(t *testing.T) {
	var nodes []simdevice.NodeStatus
	for i := MaxStatusNodes; i >= 0; i-- { // MaxStatusNodes+1 nodes, in reverse name order
		nodes = append(nodes, simdevice.NodeStatus{Node: fmt.Sprintf("node-%05d", i), PoolName: "p", DeviceCount: 8})
	}
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	setNodes(obj, nodes)
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "nodes")
	count, _, _ := unstructured.NestedInt64(obj.Object, "status", "nodeCount")
	if len(list) != MaxStatusNodes || count != MaxStatusNodes+1 {
		t.Fatalf("%d listed, nodeCount %d", len(list), count)
	}
	first, last := list[0].(map[string]any)["node"], list[len(list)-1].(map[string]any)["node"]
	if first != "node-00000" || last != fmt.Sprintf("node-%05d", MaxStatusNodes-1) {
		t.Fatalf("listed %v .. %v", first, last)
	}
	if !sameNodes(obj, nodes) {
		t.Fatal("the capped list differs from itself")
	}
	if nodes[0].Node != fmt.Sprintf("node-%05d", MaxStatusNodes) {
		t.Fatal("setNodes reordered its input")
	}

	setNodes(obj, nodes[:3])
	list, _, _ = unstructured.NestedSlice(obj.Object, "status", "nodes")
	count, _, _ = unstructured.NestedInt64(obj.Object, "status", "nodeCount")
	if len(list) != 3 || count != 3 || list[0].(map[string]any)["node"] != nodes[0].Node {
		t.Fatalf("%d listed, nodeCount %d, first %v", len(list), count, list[0])
	}
}

// status.nodes of MaxStatusNodes entries fits both copies of the CRD, and so do the 5,000 that
// earlier releases wrote (a rollback must not have its status writes refused).
func TestMaxStatusNodesFitsTheCRDs(t *testing.T) {
	for _, file := range []string{"../../deploy/crds/simulateddevicepool-crd.yaml", "../../deploy/helm/draforge/crds/simulateddevicepool-crd.yaml"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd map[string]any
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
		if len(versions) != 1 {
			t.Fatalf("%s: %d versions", file, len(versions))
		}
		v, _ := versions[0].(map[string]any)
		m, _, _ := unstructured.NestedFieldNoCopy(v, "schema", "openAPIV3Schema", "properties", "status", "properties", "nodes", "maxItems")
		if m != float64(5000) || MaxStatusNodes > 5000 {
			t.Errorf("%s: status.nodes maxItems %v, want 5000 (>= MaxStatusNodes %d)", file, m, MaxStatusNodes)
		}
	}
}
