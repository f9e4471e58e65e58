package inventory

import (
	"slices"
	"strings"
)

// topologyNames are the name parts of node label keys that name a topology domain on GPU
// clusters: Kubernetes' well-known zone and region, the rack and block of cloud and on-premises
// clusters (GKE's cloud.google.com/gce-topology-block and -subblock, the
// topology.kubernetes.io/rack of Kubernetes' own PodGroup examples) and NVIDIA's NVLink domain
// (nvidia.com/gpu.clique, set by GPU feature discovery).
var topologyNames = []string{"region", "zone", "block", "subblock", "rack", "gpu.clique", "clique",
	"gce-topology-block", "gce-topology-subblock", "gce-topology-host"}

// IsTopologyKey reports whether a node label key names a topology domain (see topologyNames),
// or has "topology" in its prefix (topology.kubernetes.io/..., topology.k8s.aws/...).
func IsTopologyKey(key string) bool {
	prefix, name, found := strings.Cut(key, "/")
	if !found {
		name, prefix = key, ""
	}
	return slices.Contains(topologyNames, name) || strings.Contains(prefix, "topology")
}

// TopologyKeys are the topology label keys any of the rows' nodes carry, sorted.
func TopologyKeys(rows []NodeOccupancy) []string {
	keys := []string{}
	for _, r := range rows {
		for k := range r.Labels {
			if IsTopologyKey(k) && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// OccupancyGroup sums the rows of one topology domain: the nodes whose label key has Value
// ("" for nodes without the label).
type OccupancyGroup struct {
	Value     string `json:"value"`
	Nodes     int    `json:"nodes"`
	Devices   int    `json:"devices"`
	Allocated int    `json:"allocated"`
	Tainted   int    `json:"tainted"`
	Free      int    `json:"free"`
}

// GroupOccupancy orders rows by their value of the label key (natural order, nodes without it
// last; within a domain the rows keep their order) and sums each domain.
func GroupOccupancy(rows []NodeOccupancy, key string) ([]NodeOccupancy, []OccupancyGroup) {
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b NodeOccupancy) int {
		return compareDomains(a.Labels[key], b.Labels[key])
	})
	var groups []OccupancyGroup
	for _, r := range out {
		v := r.Labels[key]
		if len(groups) == 0 || groups[len(groups)-1].Value != v {
			groups = append(groups, OccupancyGroup{Value: v})
		}
		g := &groups[len(groups)-1]
		g.Nodes++
		g.Devices += r.Devices
		g.Allocated += r.Allocated
		g.Tainted += r.Tainted
		g.Free += r.Free
	}
	return out, groups
}

// compareDomains orders label values naturally (rack-2 before rack-10), "" last.
func compareDomains(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	return compareNatural(a, b)
}
