package inventory

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
)

// Clients are what List reads from.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// List reads a Snapshot from the API server with one List call per resource (paginated by the
// client). namespace "" lists namespaced resources in all namespaces. A missing
// SimulatedDevicePool CRD is a warning, not an error; any other failure is returned. The result
// is sorted.
func List(ctx context.Context, c Clients, namespace string) (*Snapshot, error) {
	s := &Snapshot{Namespace: namespace}
	opts := metav1.ListOptions{}
	wrap := func(what string, err error) error { return fmt.Errorf("list %s: %w", what, err) }

	slices, err := c.Kube.ResourceV1().ResourceSlices().List(ctx, opts)
	if err != nil {
		return nil, wrap("resourceslices.resource.k8s.io", err)
	}
	s.Slices = ptrs(slices.Items)
	classes, err := c.Kube.ResourceV1().DeviceClasses().List(ctx, opts)
	if err != nil {
		return nil, wrap("deviceclasses.resource.k8s.io", err)
	}
	s.Classes = ptrs(classes.Items)
	rules, err := c.Kube.ResourceV1().DeviceTaintRules().List(ctx, opts)
	if err != nil {
		return nil, wrap("devicetaintrules.resource.k8s.io", err)
	}
	s.TaintRules = ptrs(rules.Items)
	claims, err := c.Kube.ResourceV1().ResourceClaims(namespace).List(ctx, opts)
	if err != nil {
		return nil, wrap("resourceclaims.resource.k8s.io", err)
	}
	s.Claims = ptrs(claims.Items)
	pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, opts)
	if err != nil {
		return nil, wrap("pods", err)
	}
	s.Pods = ptrs(pods.Items)
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, opts)
	if err != nil {
		return nil, wrap("nodes", err)
	}
	s.Nodes = ptrs(nodes.Items)
	// PodGroups are served only with GenericWorkload and scheduling.k8s.io/v1beta1; a reader
	// not allowed to list them still gets the rest.
	groups, err := c.Kube.SchedulingV1beta1().PodGroups(namespace).List(ctx, opts)
	switch {
	case apierrors.IsNotFound(err):
		s.PodGroupsRead = true // not served: there are none
	case apierrors.IsForbidden(err):
		s.Warnings = append(s.Warnings, "cannot list PodGroups (scheduling.k8s.io): gangs are not shown: "+err.Error())
	case err != nil:
		return nil, wrap("podgroups.scheduling.k8s.io", err)
	default:
		s.PodGroups, s.PodGroupsRead = ptrs(groups.Items), true
	}

	sdps, err := c.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(namespace).List(ctx, opts)
	switch {
	case apierrors.IsNotFound(err):
		s.Warnings = append(s.Warnings, "the SimulatedDevicePool CRD ("+gvr.SimulatedDevicePoolCRD+") is not installed")
	case err != nil:
		return nil, wrap(gvr.SimulatedDevicePoolCRD, err)
	default:
		for i := range sdps.Items {
			p, err := simdevice.FromUnstructured(&sdps.Items[i])
			if err != nil {
				s.Warnings = append(s.Warnings, err.Error())
				continue
			}
			s.Pools = append(s.Pools, p)
		}
	}
	return s.Sort(), nil
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
