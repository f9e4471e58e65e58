// Package resourcegraph builds the relationship graph of a Snapshot (SimulatedDevicePools, DRA pools,
// Nodes, Devices, DeviceClasses, ResourceClaims, Pods) and renders it as DOT, Mermaid or JSON.
// Output is deterministic: nodes are sorted by ID, edges by (from, to, kind).
package resourcegraph

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/inventory"
)

// Node kinds.
const (
	KindSDP           = "SimulatedDevicePool"
	KindResourcePool  = "ResourcePool"
	KindNode          = "Node"
	KindDevice        = "Device"
	KindDeviceClass   = "DeviceClass"
	KindResourceClaim = "ResourceClaim"
	KindPod           = "Pod"
)

// Edge kinds.
const (
	EdgePublishes = "publishes"  // SDP → ResourcePool
	EdgeOnNode    = "on-node"    // ResourcePool → Node
	EdgeHasDevice = "has-device" // ResourcePool → Device
	EdgeUsesClass = "uses-class" // ResourceClaim → DeviceClass
	EdgeAllocated = "allocated"  // ResourceClaim → Device
	EdgeUsesClaim = "uses-claim" // Pod → ResourceClaim
	EdgeRunsOn    = "runs-on"    // Pod → Node
)

// Node is one vertex. Missing is true for objects that are referenced but not in the snapshot
// (a DeviceClass a claim names, a Node a slice names, an allocated device no slice has).
type Node struct {
	ID         string            `json:"id"`
	Kind       string            `json:"kind"`
	Name       string            `json:"name"`
	Namespace  string            `json:"namespace,omitempty"`
	Missing    bool              `json:"missing,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Edge is a directed relationship.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"`
}

// Graph is the whole graph.
type Graph struct {
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
}

// IDs: a kind prefix and the object's identity. Driver names and device names cannot contain
// '/', so device IDs stay unambiguous even though pool names may.
func sdpID(ns, name string) string           { return "sdp:" + ns + "/" + name }
func poolID(driver, pool string) string      { return "pool:" + driver + "/" + pool }
func nodeID(name string) string              { return "node:" + name }
func deviceID(driver, pool, d string) string { return "device:" + driver + "/" + pool + "/" + d }
func classID(name string) string             { return "class:" + name }
func claimID(ns, name string) string         { return "claim:" + ns + "/" + name }
func podID(ns, name string) string           { return "pod:" + ns + "/" + name }

type builder struct {
	nodes map[string]*Node
	edges map[Edge]bool
}

func (b *builder) node(n Node) *Node {
	if have, ok := b.nodes[n.ID]; ok {
		if have.Missing && !n.Missing { // the real object wins over a reference
			*have = n
		}
		return have
	}
	b.nodes[n.ID] = &n
	return &n
}

func (b *builder) edge(from, to, kind string) { b.edges[Edge{from, to, kind}] = true }

// Build builds the graph of s. When s is limited to a namespace, cluster-scoped objects are
// included only when an object of that namespace leads to them; otherwise everything is.
func Build(s *inventory.Snapshot) *Graph {
	b := &builder{nodes: map[string]*Node{}, edges: map[Edge]bool{}}
	scoped := s.Namespace != ""
	nodeExists := map[string]bool{}
	for _, n := range s.Nodes {
		nodeExists[n.Name] = true
	}
	addNode := func(name string) string {
		id := nodeID(name)
		b.node(Node{ID: id, Kind: KindNode, Name: name, Missing: !nodeExists[name]})
		return id
	}

	for _, p := range s.Pools {
		b.node(Node{ID: sdpID(p.Namespace, p.Name), Kind: KindSDP, Name: p.Name, Namespace: p.Namespace,
			Attributes: map[string]string{"driver": p.Spec.DriverName, "deviceType": p.Spec.DeviceTypes(), "deviceCount": fmt.Sprint(p.Spec.PhysicalDevicesPerNode())}})
	}
	sdpInScope := map[string]bool{}
	for _, p := range s.Pools {
		sdpInScope[p.Namespace+"/"+p.Name] = true
	}

	// Devices allocated to claims in scope, to decide which pools to show when scoped.
	claimed := map[string]bool{}
	for _, c := range s.Claims {
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				claimed[poolID(r.Driver, r.Pool)] = true
			}
		}
	}
	devicesSeen := map[string]bool{}
	for _, pv := range inventory.Pools(s, true) {
		pid := poolID(pv.Driver, pv.Pool)
		if scoped && !sdpInScope[pv.SDP] && !claimed[pid] {
			continue
		}
		b.node(Node{ID: pid, Kind: KindResourcePool, Name: pv.PoolID.String(), Attributes: map[string]string{
			"generation": fmt.Sprint(pv.Generation), "health": pv.Health, "devices": fmt.Sprint(pv.Devices),
			"consistent": fmt.Sprint(pv.Consistent)}})
		if pv.SDP != "" && (sdpInScope[pv.SDP] || !scoped) {
			// Not in the snapshot when unscoped: the SDP was deleted but its slices remain.
			ns, name, _ := strings.Cut(pv.SDP, "/")
			b.node(Node{ID: sdpID(ns, name), Kind: KindSDP, Name: name, Namespace: ns, Missing: !sdpInScope[pv.SDP]})
			b.edge(sdpID(ns, name), pid, EdgePublishes)
		}
		if pv.Node != "" {
			b.edge(pid, addNode(pv.Node), EdgeOnNode)
		}
		for _, d := range pv.DeviceList {
			did := deviceID(d.Driver, d.Pool, d.Name)
			health := "Healthy"
			if !d.Healthy {
				health = "Tainted"
			}
			b.node(Node{ID: did, Kind: KindDevice, Name: d.Name, Attributes: map[string]string{"pool": pv.PoolID.String(), "health": health}})
			devicesSeen[did] = true
			b.edge(pid, did, EdgeHasDevice)
		}
	}

	classes := map[string]bool{}
	if !scoped {
		for _, c := range s.Classes {
			b.node(Node{ID: classID(c.Name), Kind: KindDeviceClass, Name: c.Name})
		}
	}
	for _, c := range s.Classes {
		classes[c.Name] = true
	}
	for _, c := range s.Claims {
		cv := inventory.Claim(s, c)
		cid := claimID(c.Namespace, c.Name)
		b.node(Node{ID: cid, Kind: KindResourceClaim, Name: c.Name, Namespace: c.Namespace, Attributes: map[string]string{"state": cv.State}})
		for _, r := range cv.Requests {
			for _, a := range r.Alternatives {
				b.node(Node{ID: classID(a.DeviceClassName), Kind: KindDeviceClass, Name: a.DeviceClassName, Missing: !classes[a.DeviceClassName]})
				b.edge(cid, classID(a.DeviceClassName), EdgeUsesClass)
			}
		}
		for _, a := range cv.Allocations {
			did := deviceID(a.Driver, a.Pool, a.Device)
			if !devicesSeen[did] {
				b.node(Node{ID: did, Kind: KindDevice, Name: a.Device, Missing: true, Attributes: map[string]string{"pool": a.Driver + "/" + a.Pool}})
			}
			b.edge(cid, did, EdgeAllocated)
		}
	}
	for _, p := range s.Pods {
		uses := false
		for _, c := range s.Claims {
			if allocator.PodReferencesClaim(p, c) {
				b.edge(podID(p.Namespace, p.Name), claimID(c.Namespace, c.Name), EdgeUsesClaim)
				uses = true
			}
		}
		if !uses && len(p.Spec.ResourceClaims) == 0 {
			continue // pods without DRA claims are not part of the graph
		}
		b.node(Node{ID: podID(p.Namespace, p.Name), Kind: KindPod, Name: p.Name, Namespace: p.Namespace})
		if p.Spec.NodeName != "" {
			b.edge(podID(p.Namespace, p.Name), addNode(p.Spec.NodeName), EdgeRunsOn)
		}
	}
	if !scoped {
		for _, n := range s.Nodes {
			addNode(n.Name)
		}
	}

	g := &Graph{Nodes: []Node{}, Edges: []Edge{}}
	for _, n := range b.nodes {
		g.Nodes = append(g.Nodes, *n)
	}
	for e := range b.edges {
		g.Edges = append(g.Edges, e)
	}
	slices.SortFunc(g.Nodes, func(x, y Node) int { return cmp.Compare(x.ID, y.ID) })
	slices.SortFunc(g.Edges, func(x, y Edge) int {
		return cmp.Or(cmp.Compare(x.From, y.From), cmp.Compare(x.To, y.To), cmp.Compare(x.Kind, y.Kind))
	})
	return g
}
