package computedomain

import (
	"reflect"
	"testing"
)

func TestDecide(t *testing.T) {
	a := Member{Name: "node-a", IPAddress: "10.244.0.1", CliqueID: "u.0"}
	b := Member{Name: "node-b", IPAddress: "10.244.0.2", CliqueID: "u.0"}
	c := Member{Name: "node-c", IPAddress: "10.244.0.3", CliqueID: "u.1"}
	node := func(m Member, i int) Node {
		return Node{Name: m.Name, IPAddress: m.IPAddress, CliqueID: m.CliqueID, Index: i, Status: Ready}
	}
	for _, tc := range []struct {
		name     string
		numNodes int
		listed   []Node
		members  []Member
		want     Status
	}{
		{"no node yet, numNodes 0: Ready (the controller's calculateGlobalStatus)", 0, nil, nil, Status{Status: Ready}},
		{"no node yet, numNodes 2", 2, nil, nil, Status{Status: NotReady}},
		{"one of two", 2, nil, []Member{b}, Status{NotReady, []Node{node(b, 0)}}},
		{"indices per clique, by name", 3, nil, []Member{c, b, a}, Status{Ready, []Node{node(a, 0), node(b, 1), node(c, 0)}}},
		// node-b keeps index 1; node-a, joining again, takes the free index 0.
		{"a listed node keeps its index, a gap is filled", 2, []Node{node(b, 1)}, []Member{a, b}, Status{Ready, []Node{node(a, 0), node(b, 1)}}},
		{"a node that left is dropped", 1, []Node{node(a, 0), node(b, 1)}, []Member{b}, Status{Ready, []Node{node(b, 1)}}},
		{"a listed NotReady node is Ready again while its channel is allocated", 1, []Node{{Name: "node-a", CliqueID: "u.0", Status: NotReady}}, []Member{a}, Status{Ready, []Node{node(a, 0)}}},
		// A node relabelled into another clique joins that clique afresh.
		{"clique changed", 1, []Node{node(Member{Name: "node-c", CliqueID: "u.0"}, 3)}, []Member{c}, Status{Ready, []Node{node(c, 0)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.numNodes, tc.listed, tc.members); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
	s := Decide(1, nil, []Member{a})
	if !s.NodeReady("node-a") || s.NodeReady("node-b") {
		t.Errorf("NodeReady: %+v", s)
	}
}
