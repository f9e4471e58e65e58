// Package clusterview is the controller's one view of the cluster, shared by the drivers that
// read it instead of each keeping a private copy of an informer's objects: how the informers
// list and watch (Watch), the form each resource is cached in (Forms: compact slices and pods,
// pruned nodes, the pod machine's pods), the indexes (pods by claim), the SimulatedDevicePools
// decoded once per event, and what the allocator reads (Objects).
package clusterview

import (
	"github.com/draforge/draforge/engine"
)

// View is the controller's one view of the cluster, handed to the drivers that read it (as
// structured.NewAllocator is handed its inputs): the informers' caches in the forms Forms
// sets, the allocator's objects, the pods by claim and the decoded pools. No driver keeps a
// private copy of an informer's objects; the process's own writes the caches lag are in
// Informers.Writes.
type View struct {
	Informers *engine.Informers
	Objects   *Objects
	Pods      *Pods
	Pools     *Pools
}

// New sets inf's cache forms (Forms) and builds the view over it, its indexes included. Call
// it before inf starts.
func New(inf *engine.Informers) (*View, error) {
	Forms(inf)
	pods, err := NewPods(inf)
	if err != nil {
		return nil, err
	}
	return &View{Informers: inf, Objects: NewObjects(inf), Pods: pods, Pools: FeedPools(inf)}, nil
}
