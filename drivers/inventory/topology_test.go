package inventory

import (
	"slices"
	"testing"
)

func TestIsTopologyKey(t *testing.T) {
	for key, want := range map[string]bool{
		"topology.kubernetes.io/zone":           true,
		"topology.kubernetes.io/rack":           true,
		"cloud.google.com/gce-topology-block":   true,
		"nvidia.com/gpu.clique":                 true,
		"topology.k8s.aws/network-node-layer-1": true,
		"rack":                                  true,
		"kubernetes.io/hostname":                false,
		"draforge.test/scenario":                false,
		"nvidia.com/gpu.product":                false,
	} {
		if got := IsTopologyKey(key); got != want {
			t.Errorf("IsTopologyKey(%q) = %v", key, got)
		}
	}
}

// Rows are ordered by domain (naturally, unlabelled last, node order kept within a domain) and
// each domain is summed.
func TestGroupOccupancy(t *testing.T) {
	row := func(node, rack string, devices, allocated int) NodeOccupancy {
		r := NodeOccupancy{Node: node, Devices: devices, Allocated: allocated, Free: devices - allocated}
		if rack != "" {
			r.Labels = map[string]string{"topology.kubernetes.io/rack": rack, "kubernetes.io/hostname": node}
		}
		return r
	}
	rows := []NodeOccupancy{row("n-0", "rack-10", 8, 8), row("n-1", "rack-2", 8, 0), row("n-2", "", 0, 0), row("n-3", "rack-10", 8, 0), row("n-4", "rack-2", 8, 4)}
	got, groups := GroupOccupancy(rows, "topology.kubernetes.io/rack")
	var order []string
	for _, r := range got {
		order = append(order, r.Node)
	}
	if !slices.Equal(order, []string{"n-1", "n-4", "n-0", "n-3", "n-2"}) {
		t.Errorf("order %v", order)
	}
	want := []OccupancyGroup{{Value: "rack-2", Nodes: 2, Devices: 16, Allocated: 4, Free: 12}, {Value: "rack-10", Nodes: 2, Devices: 16, Allocated: 8, Free: 8}, {Value: "", Nodes: 1}}
	if !slices.Equal(groups, want) {
		t.Errorf("groups %+v, want %+v", groups, want)
	}
	if rows[0].Node != "n-0" {
		t.Error("GroupOccupancy reordered its input")
	}
	if keys := TopologyKeys(rows); !slices.Equal(keys, []string{"topology.kubernetes.io/rack"}) {
		t.Errorf("TopologyKeys %v", keys)
	}
}
