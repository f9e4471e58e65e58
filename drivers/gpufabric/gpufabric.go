// Package gpufabric is the part of GPU Feature Discovery the simulation needs: whether the
// NVLink fabric of a simulated node's GPUs is attached, which decides whether the node keeps
// its NVLink clique label (machines/gpuclique.cue). GFD labels nvidia.com/gpu.clique
// "<cluster UUID>.<clique ID>" from the GPUs whose fabric is attached (NVIDIA/k8s-device-plugin
// internal/lm/imex.go getFabricIDs; go-nvlib IsFabricAttached: fabric state COMPLETED, status
// SUCCESS) and leaves the label out when none is, so a node whose fabric went down leaves its
// clique. The clique a node's GPUs belong to is the label it was created with: the simulated
// hardware has no other record of it.
package gpufabric

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/engine"
)

// GFD's clique label and the annotation keeping it while the fabric is detached.
const (
	CliqueLabel              = simdevice.CliqueLabel
	DetachedCliqueAnnotation = simdevice.DetachedCliqueAnnotation
)

// Driver reads simulated nodes and the decoded pools from the controller's view.
type Driver struct {
	inf   *engine.Informers
	pools *clusterview.Pools
}

// Register registers the gpuclique machine's observation and mapper.
func Register(reg *engine.Registry, inf *engine.Informers, pools *clusterview.Pools) *Driver {
	d := &Driver{inf: inf, pools: pools}
	inf.For(gvr.Nodes)
	reg.Observation("gpuFabricDetached", d.detached)
	reg.Mapper("poolCliqueNodes", d.poolNodes)
	return d
}

// Fabric is the NVLink fabric of one node's simulated GPUs.
type Fabric struct {
	// GPUs and Attached count the node's NVIDIA GPUs over every pool targeting it, and those
	// whose fabric is attached.
	GPUs, Attached int
	// Pools are the pools ("<namespace>/<name>") with GPUs on the node, sorted.
	Pools []string
	// Next is how long until a timed fault campaign of those pools causes its next fault on
	// the node (0: none will).
	Next time.Duration
}

// Detached holds when the node has GPUs and none has its fabric attached: GFD then has no
// clique to label.
func (f Fabric) Detached() bool { return f.GPUs > 0 && f.Attached == 0 }

// Of sums the NVLink fabric of node's GPUs over pools at now.
func Of(node *corev1.Node, pools []*simdevice.Pool, now time.Time) Fabric {
	var f Fabric
	for _, p := range pools {
		// A pool being deleted or invalid publishes nothing (DesiredSlices validates).
		if p.DeletionTimestamp != nil || !p.Targets(node) || len(p.Validate()) > 0 {
			continue
		}
		gpus, attached := p.NVLinkFabric(node.Name, now)
		if gpus == 0 {
			continue
		}
		f.GPUs += gpus
		f.Attached += attached
		f.Pools = append(f.Pools, p.Namespace+"/"+p.Name)
		if next, ok := p.Spec.NextCampaignFault([]string{node.Name}, p.Elapsed(now)); ok && (f.Next == 0 || next < f.Next) {
			f.Next = next
		}
	}
	slices.Sort(f.Pools)
	return f
}

// detached is the observation: the node's GPUs all have their NVLink fabric detached.
func (d *Driver) detached(_ context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()}}
	f := Of(node, d.pools.List(), time.Now())
	if f.GPUs == 0 {
		return engine.Fact{Message: "no simulated NVIDIA GPU on the node"}, nil
	}
	msg := fmt.Sprintf("%d of %d GPUs (pools %s) have their NVLink fabric attached", f.Attached, f.GPUs, strings.Join(f.Pools, ", "))
	return engine.Fact{Holds: f.Detached(), Message: msg, RecheckAfter: f.Next}, nil
}

// poolNodes maps a pool to the simulated nodes it targets that have a clique, and to every node
// out of its clique (the pool may have stopped targeting it, which gives the label back): the
// pool's faults and targets decide whether they keep it.
func (d *Driver) poolNodes(obj metav1.Object) []cache.ObjectName {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	pool, err := simdevice.FromUnstructured(u)
	if err != nil {
		return nil
	}
	var out []cache.ObjectName
	for _, o := range d.inf.For(gvr.Nodes).GetStore().List() {
		n, ok := o.(*corev1.Node)
		if !ok || n.Labels[simnode.LabelSimulated] != simnode.LabelSimulatedValue {
			continue
		}
		_, labelled := n.Labels[CliqueLabel]
		if _, left := simdevice.LeftClique(n.Labels, n.Annotations); left || labelled && pool.Targets(n) {
			out = append(out, cache.ObjectName{Name: n.Name})
		}
	}
	return out
}
