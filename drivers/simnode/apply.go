package simnode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/draforge/draforge/drivers/gvr"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
)

// FieldManager is the server-side apply field manager of simulated nodes.
const FieldManager = "draforge"

// Apply creates or updates the spec's nodes with server-side apply: first the object (labels,
// annotations, taints), then its status subresource (capacity, allocatable, conditions with a
// fresh heartbeat). report, if not nil, is called after each node.
func Apply(ctx context.Context, dyn dynamic.Interface, s Spec, report func(name string, err error)) error {
	api := dyn.Resource(gvr.Nodes)
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	nodes := s.Nodes(time.Now())
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(applyWorkers)
	for _, n := range nodes {
		g.Go(func() error {
			obj, status, err := applyObjects(n)
			if err == nil {
				_, err = api.Apply(ctx, n.Name, obj, opts)
			}
			if err == nil {
				_, err = api.ApplyStatus(ctx, n.Name, status, opts)
			}
			if report != nil {
				mu.Lock()
				report(n.Name, err)
				mu.Unlock()
			}
			if err != nil {
				return fmt.Errorf("apply node %s: %w", n.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// applyWorkers bounds the nodes applied at once; the client's rate limit does the rest.
const applyWorkers = 16

// Delete deletes the spec's nodes, ignoring those that do not exist (their Leases are owned
// by them and go with them). report, if not nil, is called after each node.
func Delete(ctx context.Context, dyn dynamic.Interface, s Spec, report func(name string, found bool, err error)) error {
	var errs []error
	for _, name := range s.NodeNames() {
		err := dyn.Resource(gvr.Nodes).Delete(ctx, name, metav1.DeleteOptions{})
		found := !apierrors.IsNotFound(err)
		if !found {
			err = nil
		}
		if report != nil {
			report(name, found, err)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete node %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
