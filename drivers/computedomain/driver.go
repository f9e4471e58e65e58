package computedomain

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/pods"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/engine"
)

// Indexes of the informer caches.
const (
	byUID    = "computedomain/uid"    // ComputeDomains by metadata.uid
	byDomain = "computedomain/domain" // allocated claims by the domainID of their channel config
)

// Driver reads ComputeDomains, claims and nodes from the shared informer caches.
type Driver struct {
	inf   *engine.Informers
	pools *clusterview.Pools
}

// Register registers the compute-domain machine's observations and mappers and the pod
// machine's wait for a ready domain. ComputeDomains are optional: without NVIDIA's CRD the
// machine simply has nothing to do.
func Register(reg *engine.Registry, inf *engine.Informers, pools *clusterview.Pools, pd *pods.Driver) (*Driver, error) {
	d := &Driver{inf: inf, pools: pools}
	inf.Optional(gvr.ComputeDomains, nil)
	if err := inf.For(gvr.ComputeDomains).AddIndexers(cache.Indexers{byUID: func(obj any) ([]string, error) {
		if o, ok := obj.(metav1.Object); ok {
			return []string{string(o.GetUID())}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	if err := inf.For(gvr.ResourceClaims).AddIndexers(cache.Indexers{byDomain: func(obj any) ([]string, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if id := allocatedDomain(u); id != "" {
				return []string{id}, nil
			}
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	inf.For(gvr.Nodes)
	reg.Observation("computeDomainSimulated", d.simulated)
	reg.Observation("computeDomainStatusStale", d.statusStale)
	reg.Mapper("claimComputeDomains", d.claimComputeDomains)
	reg.Mapper("computeDomainPods", d.computeDomainPods)
	pd.PrepareWaits = append(pd.PrepareWaits, d.prepareWait)
	return d, nil
}

// simulated holds when a SimulatedDevicePool publishes the compute-domain driver: only then are
// the cluster's ComputeDomains DRAForge's to run. Beside NVIDIA's real driver they are its own.
func (d *Driver) simulated(_ context.Context, _ *unstructured.Unstructured) (engine.Fact, error) {
	if slices.ContainsFunc(d.pools.List(), func(p *simdevice.Pool) bool { return p.Spec.DriverName == DriverName }) {
		return engine.Holds(true), nil
	}
	return engine.Fact{Message: "no SimulatedDevicePool publishes " + DriverName + ": the ComputeDomain is left to the real driver"}, nil
}

// statusStale holds when the ComputeDomain's status differs from Decide's; its value is the
// status to write.
func (d *Driver) statusStale(_ context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	numNodes, _, _ := unstructured.NestedInt64(obj.Object, "spec", "numNodes")
	var stored Status
	if st, ok := obj.Object["status"]; ok {
		if err := remarshal(st, &stored); err != nil {
			return engine.Fact{}, fmt.Errorf("ComputeDomain %s/%s status: %w", obj.GetNamespace(), obj.GetName(), err)
		}
	}
	want := Decide(int(numNodes), stored.Nodes, d.members(obj))
	stale := stored.Status == "" || !equality.Semantic.DeepEqual(normalized(stored), normalized(want))
	return engine.Fact{Holds: stale, Value: want, Message: fmt.Sprintf("%s, %d nodes", want.Status, len(want.Nodes))}, nil
}

func normalized(s Status) Status {
	if len(s.Nodes) == 0 {
		s.Nodes = nil
	}
	return s
}

// members are the nodes where a channel claim of the ComputeDomain, in its namespace, is allocated.
func (d *Driver) members(cd *unstructured.Unstructured) []Member {
	objs, _ := d.inf.For(gvr.ResourceClaims).GetIndexer().ByIndex(byDomain, string(cd.GetUID()))
	seen := map[string]bool{}
	var out []Member
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok || u.GetNamespace() != cd.GetNamespace() {
			continue
		}
		node := allocatedNode(u)
		if node == "" || seen[node] {
			continue
		}
		seen[node] = true
		out = append(out, Member{Name: node, IPAddress: pods.PodIP(string(cd.GetUID()) + "/" + node), CliqueID: d.clique(node)})
	}
	return out
}

// clique is the clique the node's compute-domain kubelet plugin reports: the one its GPUs
// belong to (simdevice.Clique; "" on nodes without NVLink). The plugin reads it once, at its
// start (v0.4.1 device_state.go NewDeviceState), so a fabric going down later does not change it.
func (d *Driver) clique(node string) string {
	o, ok, _ := d.inf.For(gvr.Nodes).GetStore().GetByKey(node)
	if !ok {
		return ""
	}
	if n, ok := o.(metav1.Object); ok {
		return simdevice.Clique(n.GetLabels(), n.GetAnnotations())
	}
	return ""
}

// prepareWait is the kubelet plugin's channel prepare: it fails until the claim's
// ComputeDomain exists in the claim's namespace and lists the node Ready.
func (d *Driver) prepareWait(node string, claim *resourcev1.ResourceClaim) string {
	id := domainOf(claim.Status.Allocation)
	if id == "" {
		return ""
	}
	cd := d.byUID(id)
	if cd == nil {
		return "ComputeDomain " + id + " not found"
	}
	if cd.GetNamespace() != claim.Namespace {
		return fmt.Sprintf("ComputeDomain %s/%s is not in the claim's namespace", cd.GetNamespace(), cd.GetName())
	}
	var st Status
	if s, ok := cd.Object["status"]; ok {
		_ = remarshal(s, &st)
	}
	if !st.NodeReady(node) {
		return fmt.Sprintf("ComputeDomain %s/%s does not list node %s Ready yet", cd.GetNamespace(), cd.GetName(), node)
	}
	return ""
}

func (d *Driver) byUID(uid string) *unstructured.Unstructured {
	objs, _ := d.inf.For(gvr.ComputeDomains).GetIndexer().ByIndex(byUID, uid)
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			return u
		}
	}
	return nil
}

// claimComputeDomains maps an allocated channel claim to its ComputeDomain.
func (d *Driver) claimComputeDomains(obj metav1.Object) []cache.ObjectName {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	// A claim freed or deleted has no allocation any more: its domain is found by the claim's
	// spec (the workload template's config), so the node leaves the status.
	id := allocatedDomain(u)
	if id == "" {
		id = configuredDomain(u)
	}
	if cd := d.byUID(id); id != "" && cd != nil {
		return []cache.ObjectName{{Namespace: cd.GetNamespace(), Name: cd.GetName()}}
	}
	return nil
}

// computeDomainPods maps a ComputeDomain to the pods its allocated channel claims are reserved for.
func (d *Driver) computeDomainPods(obj metav1.Object) []cache.ObjectName {
	objs, _ := d.inf.For(gvr.ResourceClaims).GetIndexer().ByIndex(byDomain, string(obj.GetUID()))
	var out []cache.ObjectName
	for _, o := range objs {
		if c, ok := o.(metav1.Object); ok {
			out = append(out, pods.ClaimPods(c)...)
		}
	}
	return out
}

// allocatedDomain is the domainID of an allocated claim's channel config
// (status.allocation.devices.config, copied from the claim by the scheduler).
func allocatedDomain(u *unstructured.Unstructured) string {
	cfg, _, _ := unstructured.NestedSlice(u.Object, "status", "allocation", "devices", "config")
	return domainIn(cfg)
}

// configuredDomain is the domainID of a claim's own channel config.
func configuredDomain(u *unstructured.Unstructured) string {
	cfg, _, _ := unstructured.NestedSlice(u.Object, "spec", "devices", "config")
	return domainIn(cfg)
}

func domainIn(configs []any) string {
	for _, c := range configs {
		m, _ := c.(map[string]any)
		if id := opaqueDomain(m); id != "" {
			return id
		}
	}
	return ""
}

func opaqueDomain(config map[string]any) string {
	op, _ := config["opaque"].(map[string]any)
	if op == nil || op["driver"] != DriverName {
		return ""
	}
	params, _ := op["parameters"].(map[string]any)
	if params == nil || params["kind"] != ChannelConfigKind {
		return ""
	}
	id, _ := params["domainID"].(string)
	return id
}

// domainOf is allocatedDomain for a typed allocation.
func domainOf(a *resourcev1.AllocationResult) string {
	if a == nil {
		return ""
	}
	for _, c := range a.Devices.Config {
		if c.Opaque == nil || c.Opaque.Driver != DriverName {
			continue
		}
		var p struct {
			Kind     string `json:"kind"`
			DomainID string `json:"domainID"`
		}
		if json.Unmarshal(c.Opaque.Parameters.Raw, &p) == nil && p.Kind == ChannelConfigKind {
			return p.DomainID
		}
	}
	return ""
}

// allocatedNode is the node an allocated claim is bound to (its allocation's node selector,
// matchFields metadata.name, as kube-scheduler writes it for node-local devices).
func allocatedNode(u *unstructured.Unstructured) string {
	terms, _, _ := unstructured.NestedSlice(u.Object, "status", "allocation", "nodeSelector", "nodeSelectorTerms")
	for _, t := range terms {
		var term corev1.NodeSelectorTerm
		if remarshal(t, &term) != nil {
			continue
		}
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

func remarshal(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
