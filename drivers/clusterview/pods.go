package clusterview

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/compactpod"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/engine"
)

// byClaim indexes the shared pod informer by the "namespace/name" of each claim a pod
// references. A claim's owner pod is found by its name instead (an index by UID cost about
// 450 bytes per cached pod).
const byClaim = "draforge.oaslananka/claim"

// Pods finds the pods that use a claim by index on the shared pod informer's cache (compact
// pods, clusterview.Forms), instead of a second map of the same pods.
type Pods struct {
	indexer cache.Indexer
}

// NewPods adds the indexes to inf's pod informer (before it starts) and returns the view.
func NewPods(inf *engine.Informers) (*Pods, error) {
	i := inf.For(gvr.Pods)
	if err := i.AddIndexers(PodIndexers()); err != nil {
		return nil, err
	}
	return &Pods{indexer: i.GetIndexer()}, nil
}

// PodIndexers are the indexes Pods reads, for an indexer of compact or typed pods.
func PodIndexers() cache.Indexers {
	return cache.Indexers{byClaim: podClaimKeys}
}

// PodsOver returns the view over an indexer that has PodIndexers (tests, snapshots).
func PodsOver(indexer cache.Indexer) *Pods { return &Pods{indexer: indexer} }

func podClaimKeys(obj any) ([]string, error) {
	switch p := obj.(type) {
	case *compactpod.Pod:
		return allocator.CompactClaimKeys(p), nil
	case *corev1.Pod:
		return allocator.ClaimKeysForPod(p), nil
	}
	return nil, nil
}

// For returns the pods referencing claim by name (spec.resourceClaims or the generated names in
// status.resourceClaimStatuses) plus its controlling owner pod, sorted by name, as new objects
// (callers may change them).
func (p *Pods) For(claim *resourcev1.ResourceClaim) []*corev1.Pod {
	found := map[types.UID]any{}
	objs, _ := p.indexer.ByIndex(byClaim, claim.Namespace+"/"+claim.Name)
	for _, o := range objs {
		if m := engine.ObjectMeta(o); m != nil {
			found[m.GetUID()] = o
		}
	}
	for _, ref := range claim.OwnerReferences {
		if ref.APIVersion != "v1" || ref.Kind != "Pod" || !ptr.Deref(ref.Controller, false) {
			continue
		}
		o, ok, _ := p.indexer.GetByKey(claim.Namespace + "/" + ref.Name)
		if m := engine.ObjectMeta(o); ok && m != nil && m.GetUID() == ref.UID {
			found[m.GetUID()] = o
		}
	}
	out := make([]*corev1.Pod, 0, len(found))
	for _, o := range found {
		switch pod := o.(type) {
		case *compactpod.Pod:
			out = append(out, pod.Expand())
		case *corev1.Pod:
			out = append(out, pod.DeepCopy())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
