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
	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/engine/machine"
)

// FieldManager is the field manager of server-side applies made by apply actions.
const FieldManager = "draforge"

// fire runs the step's transition through looplab/fsm: an FSM in the derived state fires the
// event; its before-event callback runs the actions, cancelling on the first error. A
// self-transition runs the actions and makes looplab/fsm answer NoTransitionError, which is
// the success of a transition that keeps the state. It returns the state the FSM ended in.
// docs/design.md says why the FSM does no more than this.
func (r *runner) fire(ctx context.Context, obj *unstructured.Unstructured, st Step, data func() map[string]any) (string, error) {
	f := fsm.NewFSM(st.From, r.events, fsm.Callbacks{
		"before_event": func(ctx context.Context, e *fsm.Event) {
			for _, a := range st.Transition.Actions {
				if err := r.run(ctx, obj, a, data); err != nil {
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

// run runs one action.
func (r *runner) run(ctx context.Context, obj *unstructured.Unstructured, a machine.Action, data func() map[string]any) error {
	switch {
	case a.Driver != "":
		return r.e.o.Registry.actions[a.Driver](ctx, obj)
	case a.Patch != nil:
		return r.patch(ctx, obj, a.Patch, data())
	case a.Apply != nil:
		return r.apply(ctx, a.Apply, data())
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
func MergeStatus(status, patch map[string]any) map[string]any {
	out := make(map[string]any, len(status)+len(patch))
	for k, v := range status {
		out[k] = v
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(out, k)
		case map[string]any:
			cur, _ := out[k].(map[string]any)
			out[k] = MergeStatus(cur, pv)
		case []any:
			cur, _ := out[k].([]any)
			out[k] = mergeByType(cur, pv)
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
// merge-patches the existing object instead and applies only a missing one.
func (r *runner) apply(ctx context.Context, a *machine.ApplyAction, data map[string]any) error {
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
	if a.Patch != nil {
		v, err := a.Patch.Render(data)
		if err != nil {
			return fmt.Errorf("patch template: %w", err)
		}
		body, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = patchRV(ctx, r.e.o.Dynamic, a.Resource, ns, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
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
	_, err = patchRV(ctx, r.e.o.Dynamic, a.Resource, ns, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	return err
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
