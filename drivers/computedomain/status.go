// Package computedomain simulates NVIDIA's compute-domain controller and IMEX daemons for the
// ComputeDomains (resource.nvidia.com/v1beta1) of a cluster whose compute-domain driver is a
// SimulatedDevicePool (profile nvidia-compute-domain). It mirrors
// kubernetes-sigs/dra-driver-nvidia-gpu tag v0.4.1 with the driver's ComputeDomainCliques gate
// off, so every node's daemon reports in the ComputeDomain's own status.nodes:
//   - cmd/compute-domain-controller/computedomain.go: calculateGlobalStatus (NotReady while
//     fewer nodes than spec.numNodes or any node NotReady, else Ready);
//   - cmd/compute-domain-daemon/cdstatus.go: a node joins with its clique ID and the lowest
//     index free within its clique (getNextAvailableIndex), keeps it while it stays;
//   - cmd/compute-domain-kubelet-plugin/computedomain.go: a workload's channel is prepared on a
//     node only once the ComputeDomain lists that node Ready (AssertComputeDomainReady), and
//     only for a claim in the ComputeDomain's namespace (AssertComputeDomainNamespace).
//
// A node's daemon runs (and the node is in the domain) while a channel claim of the domain is
// allocated on it: in the driver the channel's prepare labels the node, the label starts the
// DaemonSet's daemon there, and the unprepare removes both. The simulated daemon is Ready at
// once; no DaemonSet or daemon pod is created.
//
// status.go holds the pure decisions; driver.go reads them from the informer caches.
package computedomain

import (
	"slices"
	"strings"
)

// Names of the driver and its API (pkg/... and api/nvidia.com/resource/v1beta1 at v0.4.1).
const (
	DriverName = "compute-domain.nvidia.com"
	// ChannelConfigKind is the opaque config the workload claim template carries.
	ChannelConfigKind = "ComputeDomainChannelConfig"
	Ready             = "Ready"
	NotReady          = "NotReady"
)

// Node is one entry of status.nodes.
type Node struct {
	Name      string `json:"name"`
	IPAddress string `json:"ipAddress"`
	CliqueID  string `json:"cliqueID"`
	Index     int    `json:"index"`
	Status    string `json:"status"`
}

// Status is the ComputeDomain's status.
type Status struct {
	Status string `json:"status"`
	Nodes  []Node `json:"nodes"`
}

// Member is a node whose daemon runs for the domain: a channel claim of it is allocated there.
type Member struct {
	Name, IPAddress, CliqueID string
}

// Decide returns the status for the members: nodes already listed keep their index, new ones
// take the lowest index free in their clique; nodes are sorted by clique, then index.
func Decide(numNodes int, listed []Node, members []Member) Status {
	kept := map[string]Node{}
	for _, n := range listed {
		kept[n.Name] = n
	}
	var out []Node
	used := map[string]map[int]bool{}
	var joining []Member
	for _, m := range members {
		if n, ok := kept[m.Name]; ok && n.CliqueID == m.CliqueID {
			n.IPAddress, n.Status = m.IPAddress, Ready
			out = append(out, n)
			if used[n.CliqueID] == nil {
				used[n.CliqueID] = map[int]bool{}
			}
			used[n.CliqueID][n.Index] = true
			continue
		}
		joining = append(joining, m)
	}
	slices.SortFunc(joining, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range joining {
		if used[m.CliqueID] == nil {
			used[m.CliqueID] = map[int]bool{}
		}
		i := 0
		for used[m.CliqueID][i] {
			i++
		}
		used[m.CliqueID][i] = true
		out = append(out, Node{Name: m.Name, IPAddress: m.IPAddress, CliqueID: m.CliqueID, Index: i, Status: Ready})
	}
	slices.SortFunc(out, func(a, b Node) int {
		if c := strings.Compare(a.CliqueID, b.CliqueID); c != 0 {
			return c
		}
		return a.Index - b.Index
	})
	return Status{Status: global(numNodes, out), Nodes: out}
}

// global is calculateGlobalStatus.
func global(numNodes int, nodes []Node) string {
	if len(nodes) < numNodes {
		return NotReady
	}
	for _, n := range nodes {
		if n.Status == NotReady {
			return NotReady
		}
	}
	return Ready
}

// NodeReady reports whether the status lists node as Ready (isCurrentNodeReadyInStatus).
func (s Status) NodeReady(node string) bool {
	return slices.ContainsFunc(s.Nodes, func(n Node) bool { return n.Name == node && n.Status == Ready })
}
