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
	"maps"
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

const (
	// CliqueLabel is GFD's node label of the NVLink clique.
	CliqueLabel = "nvidia.com/gpu.clique"
	// DetachedCliqueAnnotation keeps a node's clique while its fabric is detached and the
	// label is gone, so the label comes back when the fabric does.
	DetachedCliqueAnnotation = "draforge.oaslananka/detached-gpu-clique"
)

// Clique is the NVLink clique a node's GPUs belong to: its label, or while its fabric is
// detached the clique kept for it ("" for a node without NVLink).
func Clique(labels, annotations map[string]string) string {
	if c, ok := labels[CliqueLabel]; ok {
		return c
	}
	return annotations[DetachedCliqueAnnotation]
}

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
		if !p.Targets(node) {
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

// hardware is the node as its GPUs' pools target it: with its clique label even while the label
// is gone, so a pool selecting nodes by clique keeps counting the GPUs that took the node out
// of it (else the label would come back, and go again, forever).
func hardware(name string, labels, annotations map[string]string) *corev1.Node {
	if _, labelled := labels[CliqueLabel]; !labelled {
		if c, ok := annotations[DetachedCliqueAnnotation]; ok {
			labels = maps.Clone(labels)
			if labels == nil {
				labels = map[string]string{}
			}
			labels[CliqueLabel] = c
		}
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// detached is the observation: the node's GPUs all have their NVLink fabric detached.
func (d *Driver) detached(_ context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	f := Of(hardware(obj.GetName(), obj.GetLabels(), obj.GetAnnotations()), d.pools.List(), time.Now())
	if f.GPUs == 0 {
		return engine.Fact{Message: "no simulated NVIDIA GPU on the node"}, nil
	}
	msg := fmt.Sprintf("%d of %d GPUs (pools %s) have their NVLink fabric attached", f.Attached, f.GPUs, strings.Join(f.Pools, ", "))
	return engine.Fact{Holds: f.Detached(), Message: msg, RecheckAfter: f.Next}, nil
}

// poolNodes maps a pool to the simulated nodes it targets that have a clique, or had one
// before their fabric went down: its faults decide whether they keep it.
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
		_, kept := n.Annotations[DetachedCliqueAnnotation]
		if (labelled || kept) && pool.Targets(hardware(n.Name, n.Labels, n.Annotations)) {
			out = append(out, cache.ObjectName{Name: n.Name})
		}
	}
	return out
}
