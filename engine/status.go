package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// setConditions makes obj's conditions conds (the target state's, rendered), keeping
// lastTransitionTime for conditions whose status did not change, and records
// observedGeneration. Conditions the state does not speak about (written by others) are kept.
func (r *runner) setConditions(obj *unstructured.Unstructured, conds []Condition) {
	existing := conditionsOf(obj.Object)
	old := map[string]map[string]any{}
	for _, c := range existing {
		if m, ok := c.(map[string]any); ok {
			t, _ := m["type"].(string)
			old[t] = m
		}
	}
	declared := map[string]bool{}
	gen := obj.GetGeneration()
	now := metav1.NewTime(r.e.o.Now()).UTC().Format("2006-01-02T15:04:05Z")
	out := make([]any, 0, len(conds)+len(existing))
	for _, c := range conds {
		declared[c.Type] = true
		ltt := now
		if prev, ok := old[c.Type]; ok && prev["status"] == c.Status {
			if s, ok := prev["lastTransitionTime"].(string); ok {
				ltt = s
			}
		}
		out = append(out, map[string]any{
			"type": c.Type, "status": c.Status, "reason": c.Reason, "message": c.Message,
			"lastTransitionTime": ltt, "observedGeneration": gen,
		})
	}
	for _, c := range existing {
		if m, ok := c.(map[string]any); ok && !declared[fmt.Sprint(m["type"])] {
			out = append(out, m)
		}
	}
	_ = unstructured.SetNestedSlice(obj.Object, out, "status", "conditions")
	_ = unstructured.SetNestedField(obj.Object, gen, "status", "observedGeneration")
}

// statusOf returns a copy of obj's status.
func statusOf(obj *unstructured.Unstructured) map[string]any {
	s, _, _ := unstructured.NestedMap(obj.Object, "status")
	return s
}

// statusView returns obj's status itself, for reading only.
func statusView(obj *unstructured.Unstructured) map[string]any {
	s, _ := obj.Object["status"].(map[string]any)
	return s
}

// sameStatus compares two statuses as JSON would: most passes change nothing, and a plain
// deep comparison says so without the JSON round trip that number types need otherwise.
func sameStatus(a, b map[string]any) bool {
	return len(statusPatch(a, b)) == 0
}

// statusPatch returns the top-level status fields of after that differ from before, as JSON
// would compare them, and the fields after dropped as nil. Field by field: a pod's status
// changes one or two fields of many, and the JSON round trip is paid only for those.
func statusPatch(before, after map[string]any) map[string]any {
	patch := map[string]any{}
	for k, v := range after {
		if old, ok := before[k]; !ok || !(reflect.DeepEqual(old, v) || sameJSON(old, v)) {
			patch[k] = v
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			patch[k] = nil
		}
	}
	return patch
}

// writeStatus merge-patches the status subresource when it differs from before. A merge patch
// needs no resourceVersion, so finalizer patches made by actions earlier in the same pass do not
// turn it into a conflict; fields the pass removed are sent as null. before is only read.
// decided says the pass decides again on what it wrote (decideAgain): the write's echo is then
// no news to this machine (Writes.Echo) and obj takes the write's resourceVersion. wrote
// reports a write.
func (r *runner) writeStatus(ctx context.Context, obj *unstructured.Unstructured, before map[string]any, decided bool) (wrote bool, err error) {
	// Only the top-level status fields that changed (a Node's images and addresses stay out).
	patch := statusPatch(before, statusView(obj))
	if len(patch) == 0 {
		return false, nil
	}
	doc := map[string]any{"status": patch}
	if !r.m.Status.Conditions {
		// Lists of an object we do not own (a Node's conditions) are sent whole: the read
		// resourceVersion makes a concurrent writer's change a Conflict, not a lost update.
		doc["metadata"] = map[string]any{"resourceVersion": obj.GetResourceVersion()}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return false, err
	}
	key, writes := cacheKey(obj), r.e.o.Informers.Writes()
	if decided {
		writes.Writing(r.m.Resource, key, r.m.Name)
	}
	rv, err := patchRV(ctx, r.e.o.Dynamic, r.m.Resource, obj.GetNamespace(), obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{}, "status")
	switch {
	case !decided:
		if err == nil {
			r.expect(obj, rv)
		}
		return err == nil, err
	case err != nil:
		if writes.NotWritten(r.m.Resource, key) {
			r.add(key) // events held during the write were news
		}
		return false, err
	}
	if rv != "" {
		obj.SetResourceVersion(rv)
	}
	if writes.WroteObject(r.m.Resource, key, rv, r.m.Name, obj.Object) {
		r.add(key)
	}
	return true, nil
}

// expect remembers the resourceVersion our write produced (Informers.Writes). Until the cache
// has caught up with it, a pass would decide on stale state and repeat the write; the watch
// event of the write enqueues the key again anyway.
func (r *runner) expect(obj *unstructured.Unstructured, rv string) {
	if rv == "" {
		return // an answer without a resourceVersion: nothing to wait for ("" would mean deleted)
	}
	r.e.o.Informers.Writes().Wrote(r.m.Resource, cacheKey(obj), rv, "")
}

// stale reports whether the cached object is older than our last write of it.
func (r *runner) stale(obj *unstructured.Unstructured) bool {
	return r.e.o.Informers.Writes().Lags(r.m.Resource, cacheKey(obj), obj)
}

func cacheKey(obj *unstructured.Unstructured) string {
	return cache.ObjectName{Namespace: obj.GetNamespace(), Name: obj.GetName()}.String()
}
