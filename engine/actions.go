package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/looplab/fsm"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/engine/machine"
)

// FieldManager is the field manager of server-side applies made by apply actions.
const FieldManager = "draforge"

// fire runs the step's transition through looplab/fsm: an FSM in the derived state fires the
// event; its before-event callback runs the actions, cancelling on the first error. A
// self-transition runs the actions and makes looplab/fsm answer NoTransitionError, which is
// the success of a transition that keeps the state. It returns the state the FSM ended in.
// docs/design.md says why the FSM does no more than this.
func (r *runner) fire(ctx context.Context, obj *unstructured.Unstructured, st Step, data func() map[string]any, facts *passFacts) (string, error) {
	f := fsm.NewFSM(st.From, r.events, fsm.Callbacks{
		"before_event": func(ctx context.Context, e *fsm.Event) {
			for _, a := range st.Transition.Actions {
				if err := r.run(ctx, obj, a, data, facts); err != nil {
					e.Cancel(fmt.Errorf("action %s: %w", a, err))
					return
				}
			}
		},
	})
	err := f.Event(ctx, st.Event)
	var nt fsm.NoTransitionError
	var canceled fsm.CanceledError
	switch {
	case err == nil:
	case errors.As(err, &nt) && st.From == st.To:
		// The state stays: looplab/fsm reports that, the actions ran in before_event.
	case errors.As(err, &canceled):
		return st.From, canceled.Err
	default:
		return st.From, fmt.Errorf("fsm: %w", err)
	}
	return f.Current(), nil
}

// run runs one action; f (nil outside a pass) learns what it wrote of the related objects.
func (r *runner) run(ctx context.Context, obj *unstructured.Unstructured, a machine.Action, data func() map[string]any, f *passFacts) error {
	switch {
	case a.Driver != "":
		return r.e.o.Registry.actions[a.Driver](ctx, obj)
	case a.Patch != nil:
		return r.patch(ctx, obj, a.Patch, data())
	case a.Apply != nil:
		return r.apply(ctx, a.Apply, data(), obj, f)
	case a.Finalizer != nil:
		return r.finalizer(ctx, obj, a.Finalizer)
	case a.Delete:
		// The UID precondition never deletes a re-created object of the same name.
		uid := obj.GetUID()
		err := r.e.o.Dynamic.Resource(r.m.Resource).Namespace(obj.GetNamespace()).Delete(ctx, obj.GetName(),
			metav1.DeleteOptions{GracePeriodSeconds: a.GracePeriodSeconds, Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	case a.Event != nil:
		msg, err := a.Event.Message.RenderString(data())
		if err != nil {
			return err
		}
		typ := a.Event.Type
		if typ == "" {
			typ = corev1.EventTypeNormal
		}
		r.event(obj, typ, a.Event.Reason, msg)
		return nil
	}
	return fmt.Errorf("empty action")
}

// patch merges the rendered status into obj in memory (written by the pass's one status write)
// and merge-patches metadata at once.
func (r *runner) patch(ctx context.Context, obj *unstructured.Unstructured, p *machine.PatchAction, data map[string]any) error {
	if p.Status != nil {
		v, err := p.Status.Render(data)
		if err != nil {
			return fmt.Errorf("status template: %w", err)
		}
		status, _ := obj.Object["status"].(map[string]any)
		obj.Object["status"] = MergeStatus(status, v.(map[string]any))
	}
	if p.Metadata == nil {
		return nil
	}
	v, err := p.Metadata.Render(data)
	if err != nil {
		return fmt.Errorf("metadata template: %w", err)
	}
	md, _ := v.(map[string]any)
	if !metadataChanges(obj, md) {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return err
	}
	out, err := r.e.o.Dynamic.Resource(r.m.Resource).Namespace(obj.GetNamespace()).
		Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return err
	}
	obj.SetLabels(out.GetLabels())
	obj.SetAnnotations(out.GetAnnotations())
	obj.SetResourceVersion(out.GetResourceVersion())
	return nil
}

// metadataChanges reports whether a labels/annotations patch would change obj.
func metadataChanges(obj *unstructured.Unstructured, md map[string]any) bool {
	for kind, have := range map[string]map[string]string{"labels": obj.GetLabels(), "annotations": obj.GetAnnotations()} {
		want, _ := md[kind].(map[string]any)
		for k, v := range want {
			cur, ok := have[k]
			if v == nil && ok || v != nil && (!ok || fmt.Sprint(v) != cur) {
				return true
			}
		}
	}
	return false
}

// MergeStatus merges patch into status like a strategic merge patch of conditions: maps merge
// key by key, lists of objects with a "type" merge element by type (so a patch of the Ready
// condition keeps the others), other values replace, null deletes.
func MergeStatus(status, patch map[string]any) map[string]any { return merge(status, patch, true) }

// mergePatch returns target with an RFC 7386 JSON merge patch applied, as the API server
// applies an apply action's patch: lists replace.
func mergePatch(target, patch map[string]any) map[string]any { return merge(target, patch, false) }

// merge returns target with patch merged in: maps key by key, null deletes, other values
// replace; with byType lists of objects with a "type" merge element by type. target is not
// modified (maps on the patch's paths are copied).
func merge(target, patch map[string]any, byType bool) map[string]any {
	out := make(map[string]any, len(target)+len(patch))
	for k, v := range target {
		out[k] = v
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(out, k)
		case map[string]any:
			cur, _ := out[k].(map[string]any)
			out[k] = merge(cur, pv, byType)
		case []any:
			if byType {
				cur, _ := out[k].([]any)
				out[k] = mergeByType(cur, pv)
			} else {
				out[k] = v
			}
		default:
			out[k] = v
		}
	}
	return out
}

func mergeByType(cur, patch []any) []any {
	typeOf := func(v any) (string, bool) {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		t, ok := m["type"].(string)
		return t, ok
	}
	for _, p := range patch {
		if _, ok := typeOf(p); !ok {
			return patch // not a list of typed entries: replace
		}
	}
	out := slices.Clone(cur)
	for _, p := range patch {
		t, _ := typeOf(p)
		i := slices.IndexFunc(out, func(c any) bool { ct, ok := typeOf(c); return ok && ct == t })
		if i < 0 {
			out = append(out, p)
			continue
		}
		prev, _ := out[i].(map[string]any)
		out[i] = MergeStatus(prev, p.(map[string]any))
	}
	return out
}

// apply server-side applies a related object from its template; with a patch template it
// merge-patches the existing object instead and applies only a missing one. When the object
// is one of owner's related objects, the pass's facts f learn it as written.
func (r *runner) apply(ctx context.Context, a *machine.ApplyAction, data map[string]any, owner *unstructured.Unstructured, f *passFacts) error {
	name, err := a.Name.RenderString(data)
	if err != nil {
		return fmt.Errorf("name template: %w", err)
	}
	ns := ""
	if a.Namespace != nil {
		if ns, err = a.Namespace.RenderString(data); err != nil {
			return fmt.Errorf("namespace template: %w", err)
		}
	}
	w := r.relatedWrite(f, owner, a.Resource, ns, name)
	if a.Patch != nil {
		v, err := a.Patch.Render(data)
		if err != nil {
			return fmt.Errorf("patch template: %w", err)
		}
		body, err := json.Marshal(v)
		if err != nil {
			return err
		}
		w.start()
		rv, err := patchRV(ctx, r.e.o.Dynamic, a.Resource, ns, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		patch, _ := v.(map[string]any)
		w.end(rv, err, func(before map[string]any) map[string]any { return mergePatch(before, patch) })
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	v, err := a.Object.Render(data)
	if err != nil {
		return fmt.Errorf("object template: %w", err)
	}
	obj, _ := v.(map[string]any)
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	md["name"] = name
	if ns != "" {
		md["namespace"] = ns
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	force := true
	w.start()
	rv, err := patchRV(ctx, r.e.o.Dynamic, a.Resource, ns, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	w.end(rv, err, func(map[string]any) map[string]any { return obj })
	return err
}

// relatedWrite is an action's write of one of a pass's related objects (zero: of any other
// object, or outside a pass), announced to Writes so that its echo is told apart.
type relatedWrite struct {
	r    *runner
	f    *passFacts
	name string // the related object's name in the machine
	gvr  schema.GroupVersionResource
	key  string
}

func (r *runner) relatedWrite(f *passFacts, owner *unstructured.Unstructured, gvr schema.GroupVersionResource, ns, name string) relatedWrite {
	if f == nil || owner == nil {
		return relatedWrite{}
	}
	key := cache.ObjectName{Namespace: ns, Name: name}.String()
	for _, n := range r.m.RelatedOrder {
		rel := r.related[n]
		if k, ok := rel.key(owner); ok && k == key && rel.spec.Resource == gvr {
			return relatedWrite{r: r, f: f, name: n, gvr: gvr, key: key}
		}
	}
	return relatedWrite{}
}

func (w relatedWrite) start() {
	if w.f != nil {
		w.f.Related(w.name) // read before the write: what the write changes
		w.r.e.o.Informers.Writes().Writing(w.gvr, w.key, w.r.m.Name)
	}
}

// end records the write's outcome: on success the object as written(the object before) at
// rv. Events held meanwhile that were not its echo go to the object's watchers now.
func (w relatedWrite) end(rv string, err error, written func(before map[string]any) map[string]any) {
	if w.f == nil {
		return
	}
	var news bool
	if err != nil {
		news = w.r.e.o.Informers.Writes().NotWritten(w.gvr, w.key)
	} else {
		news = w.f.wroteRelated(w.name, w.key, rv, written(w.f.Related(w.name)))
	}
	if news {
		for _, owner := range w.r.relIndex.ownersOf(w.gvr, w.key) {
			w.r.add(owner)
		}
	}
}

// finalizer adds or removes one finalizer with a merge patch carrying the cached
// resourceVersion, so a concurrent change is a Conflict to retry, never a lost finalizer.
func (r *runner) finalizer(ctx context.Context, obj *unstructured.Unstructured, f *machine.FinalizerAction) error {
	cur := obj.GetFinalizers()
	var want []string
	switch {
	case f.Add != "" && !slices.Contains(cur, f.Add):
		want = append(slices.Clone(cur), f.Add)
	case f.Remove != "" && slices.Contains(cur, f.Remove):
		want = slices.DeleteFunc(slices.Clone(cur), func(s string) bool { return s == f.Remove })
		if want == nil {
			want = []string{}
		}
	default:
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": want, "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return err
	}
	out, err := r.e.o.Dynamic.Resource(r.m.Resource).Namespace(obj.GetNamespace()).
		Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) && obj.GetDeletionTimestamp() != nil {
		return nil // the object is gone: an earlier pass let it go
	}
	if err != nil {
		return err
	}
	obj.SetFinalizers(out.GetFinalizers())
	obj.SetResourceVersion(out.GetResourceVersion())
	return nil
}
