// Package scenario vets, decodes, orders, applies and resets scenario files: multi-document
// YAML streams of Namespaces, SimulatedNodes, DeviceClasses, SimulatedDevicePools,
// ResourceClaims and Pods, checked against schemas.#Document before anything reaches the API
// server. SimulatedNodes documents are expanded into the Nodes they declare (drivers/simnode).
package scenario

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/schemas"
)

// FieldManager is the server-side apply field manager of scenario apply.
const FieldManager = "draforge"

// Kind is what a scenario document may be, with its resource and apply order.
type Kind struct {
	APIVersion, Kind string
	GVR              schema.GroupVersionResource
	Namespaced       bool
	// Order: lower applies first (namespaces before what lives in them, classes and pools
	// before claims, claims before the pods that use them); reset deletes in reverse.
	Order int
}

// Kinds are the document kinds #Document allows, in apply order.
var Kinds = []Kind{
	{"v1", "Namespace", gvr.Namespaces, false, 0},
	{simnode.APIVersion, simnode.Kind, gvr.Nodes, false, 0},
	{"resource.k8s.io/v1", "DeviceClass", gvr.DeviceClasses, false, 1},
	// Kueue's queues before the Jobs that name them: a Job applied first would be admitted
	// only once its LocalQueue exists, and Kueue's webhook refuses nothing for it.
	{"kueue.x-k8s.io/v1beta2", "ResourceFlavor", resourceFlavors, false, 1},
	{"kueue.x-k8s.io/v1beta2", "ClusterQueue", clusterQueues, false, 1},
	{"kueue.x-k8s.io/v1beta2", "LocalQueue", localQueues, true, 2},
	{simdevice.Group + "/" + simdevice.Version, simdevice.Kind, gvr.SimulatedDevicePools, true, 2},
	// Published as written (a snapshot's devices): with the pools, before the claims.
	{"resource.k8s.io/v1", "ResourceSlice", gvr.ResourceSlices, false, 2},
	{"resource.k8s.io/v1", "ResourceClaim", gvr.ResourceClaims, true, 3},
	{"resource.k8s.io/v1", "ResourceClaimTemplate", schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"}, true, 3},
	// Before the pods whose claims its template makes (the compute-domain machine writes it).
	{"resource.nvidia.com/v1beta1", "ComputeDomain", gvr.ComputeDomains, true, 3},
	// Before its pods, as a Job's: kube-scheduler waits for a pod's PodGroup.
	{"scheduling.k8s.io/v1beta1", "PodGroup", podGroups, true, 3},
	{"v1", "Pod", gvr.Pods, true, 4},
	{"batch/v1", "Job", schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, true, 4},
	{"apps/v1", "Deployment", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true, 4},
	// Taint rules come last: a fault applied after the workloads it hits.
	{"resource.k8s.io/v1", "DeviceTaintRule", schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"}, false, 5},
}

// KindOf returns the Kind of a decoded document.
func KindOf(u *unstructured.Unstructured) (Kind, bool) {
	for _, k := range Kinds {
		if k.APIVersion == u.GetAPIVersion() && k.Kind == u.GetKind() {
			return k, true
		}
	}
	return Kind{}, false
}

// Vet checks src against schemas.#Document. The error, if any, lists every problem with its
// filename:line:col (see Format).
func Vet(filename string, src []byte) error {
	return schemas.ValidateScenario(filename, src)
}

// Format renders a Vet error as one "file:line:col: path: message" line per problem, every
// problem of every document, in file order (the first position of each; further positions are
// appended as "(also file:line:col)"). A value outside an enum reads `unknown profile
// "nvidia-h999" (valid: ...; closest: nvidia-gpu)` (schemas.ValidateScenario). Problems without
// a position in the file (none expected: rules across fields get the position of the value
// they check) are prefixed with filename.
func Format(filename string, err error) string {
	type line struct {
		file     string
		row, col int
		text     string
	}
	var lines []line
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		p := e.Path()
		if len(p) > 0 && strings.HasPrefix(p[0], "#") {
			p = p[1:] // every document is checked against #Document (or #WorkloadTrace): naming it says nothing
		}
		if len(p) > 0 {
			msg = strings.Join(p, ".") + ": " + msg
		}
		var pos []token.Pos
		for _, p := range cueerrors.Positions(e) {
			if p.Filename() == "" || strings.HasPrefix(p.Filename(), "schemas/") {
				continue // positions inside the embedded schema do not help the author
			}
			pos = append(pos, p)
		}
		if len(pos) == 0 {
			lines = append(lines, line{file: filename, text: filename + ": " + msg})
			continue
		}
		l := line{file: pos[0].Filename(), row: pos[0].Line(), col: pos[0].Column()}
		l.text = fmt.Sprintf("%s:%d:%d: %s", l.file, l.row, l.col, msg)
		if len(pos) > 1 {
			var also []string
			for _, p := range pos[1:] {
				also = append(also, fmt.Sprintf("%s:%d:%d", p.Filename(), p.Line(), p.Column()))
			}
			l.text += " (also " + strings.Join(also, ", ") + ")"
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return err.Error()
	}
	slices.SortFunc(lines, func(a, b line) int {
		return cmp.Or(cmp.Compare(a.file, b.file), cmp.Compare(a.row, b.row), cmp.Compare(a.col, b.col), cmp.Compare(a.text, b.text))
	})
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, l.text)
	}
	return strings.Join(slices.Compact(out), "\n")
}

// Object is one decoded document and where it came from.
type Object struct {
	File  string                     `json:"file"`
	Index int                        `json:"index"` // document index in the file, from 0
	Kind  Kind                       `json:"-"`
	Obj   *unstructured.Unstructured `json:"object"`
}

// Decode vets src and decodes its documents (empty documents are skipped). Namespaced objects
// without a namespace get defaultNamespace. A value Kubernetes' YAML decoder reads otherwise
// than the schema did (an unquoted yes/no/on/off/y/n) is a VetError at its position.
func Decode(filename string, src []byte, defaultNamespace string) ([]Object, error) {
	if err := Vet(filename, src); err != nil {
		return nil, &VetError{File: filename, Err: err}
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(src), 4096)
	var out []Object
	for i := 0; ; i++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				if err := sameReading(filename, src, out); err != nil {
					var cerr cueerrors.Error
					if errors.As(err, &cerr) {
						return nil, &VetError{File: filename, Err: err}
					}
					return nil, err
				}
				for _, o := range out {
					if o.Kind.Namespaced && o.Obj.GetNamespace() == "" {
						o.Obj.SetNamespace(defaultNamespace)
					}
				}
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", filename, i, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		k, ok := KindOf(u)
		if !ok { // #Document already rejects this; kept as a guard
			return nil, fmt.Errorf("%s: document %d: unsupported %s %s", filename, i, u.GetAPIVersion(), u.GetKind())
		}
		out = append(out, Object{File: filename, Index: i, Kind: k, Obj: u})
	}
}

// VetError is a schema violation found by Decode.
type VetError struct {
	File string
	Err  error
}

func (e *VetError) Error() string { return Format(e.File, e.Err) }
func (e *VetError) Unwrap() error { return e.Err }

// Sort orders objects for apply: by Kind.Order, then file and document order (stable).
func Sort(objs []Object) {
	slices.SortStableFunc(objs, func(a, b Object) int { return cmp.Compare(a.Kind.Order, b.Kind.Order) })
}

// Ref names an object for messages: "kind/name" or "kind namespace/name".
func Ref(o Object) string {
	if o.Obj.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", o.Kind.Kind, o.Obj.GetNamespace(), o.Obj.GetName())
	}
	return fmt.Sprintf("%s %s", o.Kind.Kind, o.Obj.GetName())
}

func resource(dyn dynamic.Interface, o Object) dynamic.ResourceInterface {
	r := dyn.Resource(o.Kind.GVR)
	if o.Kind.Namespaced {
		return r.Namespace(o.Obj.GetNamespace())
	}
	return r
}

// Apply server-side applies objects in apply order (it sorts a copy) with field manager
// "draforge". It stops at the first error; report is called after each object.
func Apply(ctx context.Context, dyn dynamic.Interface, objs []Object, force bool, report func(o Object, err error)) error {
	objs = slices.Clone(objs)
	Sort(objs)
	for _, o := range objs {
		var err error
		if o.Kind.Kind == simnode.Kind {
			err = applyNodes(ctx, dyn, o)
		} else {
			err = applyObject(ctx, dyn, o, force)
		}
		report(o, err)
		if err != nil {
			return fmt.Errorf("apply %s (%s document %d): %w", Ref(o), o.File, o.Index, err)
		}
	}
	return nil
}

// applyObject applies one object. A pod in a namespace created a moment ago is refused until
// kube-controller-manager created the namespace's default ServiceAccount: that is retried for
// up to serviceAccountWait.
func applyObject(ctx context.Context, dyn dynamic.Interface, o Object, force bool) error {
	deadline := time.Now().Add(serviceAccountWait)
	for {
		_, err := resource(dyn, o).Apply(ctx, o.Obj.GetName(), o.Obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: force})
		if err == nil || o.Kind.Kind != "Pod" || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "serviceaccount") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// serviceAccountWait bounds the wait for a new namespace's default ServiceAccount.
const serviceAccountWait = 30 * time.Second

// Reset deletes objects in reverse apply order, ignoring ones that do not exist. It tries
// every object and returns all errors.
func Reset(ctx context.Context, dyn dynamic.Interface, objs []Object, report func(o Object, found bool, err error)) error {
	objs = slices.Clone(objs)
	Sort(objs)
	slices.Reverse(objs)
	var errs []error
	policy := metav1.DeletePropagationBackground
	for _, o := range objs {
		var err error
		found := true
		if o.Kind.Kind == simnode.Kind {
			found, err = deleteNodes(ctx, dyn, o)
		} else {
			err = resource(dyn, o).Delete(ctx, o.Obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &policy})
			found = !apierrors.IsNotFound(err)
			if !found {
				err = nil
			}
		}
		report(o, found, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", Ref(o), err))
		}
	}
	return errors.Join(errs...)
}

// applyNodes creates or updates the Nodes a SimulatedNodes document declares. Nodes are
// always applied with force: their fields belong to whoever declared them.
func applyNodes(ctx context.Context, dyn dynamic.Interface, o Object) error {
	spec, err := simnode.Decode(o.Obj)
	if err != nil {
		return err
	}
	return simnode.Apply(ctx, dyn, spec, nil)
}

// deleteNodes deletes the Nodes a SimulatedNodes document declares; found is whether any existed.
func deleteNodes(ctx context.Context, dyn dynamic.Interface, o Object) (found bool, err error) {
	spec, err := simnode.Decode(o.Obj)
	if err != nil {
		return false, err
	}
	err = simnode.Delete(ctx, dyn, spec, func(_ string, f bool, _ error) { found = found || f })
	return found, err
}
