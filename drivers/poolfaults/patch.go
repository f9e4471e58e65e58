package poolfaults

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
)

// Patch reads the pool namespace/name, computes its new faults with edit and writes them with
// a MergePatch guarded by the resourceVersion read, reading and editing again on Conflict. It
// returns the pool as written.
func Patch(ctx context.Context, dyn dynamic.Interface, namespace, name string, edit func(*simdevice.Pool) ([]simdevice.Fault, error)) (*simdevice.Pool, error) {
	r := dyn.Resource(gvr.SimulatedDevicePools).Namespace(namespace)
	var out *simdevice.Pool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := r.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p, err := simdevice.FromUnstructured(u)
		if err != nil {
			return err
		}
		fs, err := edit(p)
		if err != nil {
			return err
		}
		patch, err := MergePatch(u.GetResourceVersion(), fs)
		if err != nil {
			return err
		}
		u, err = r.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "draforge"})
		if err != nil {
			return err
		}
		out, err = simdevice.FromUnstructured(u)
		return err
	})
	return out, err
}
