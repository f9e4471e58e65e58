package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/looplab/fsm"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/engine/machine"
)

// test evaluates one machine predicate against obj.
func (r *runner) test(ctx context.Context, obj *unstructured.Unstructured, t machine.Test) (bool, error) {
	var ok bool
	switch {
	case t.Observe != "":
		var err error
		if ok, err = r.e.o.Registry.observations[t.Observe](ctx, obj); err != nil {
			return false, fmt.Errorf("observation %s: %w", t.Observe, err)
		}
	case t.Deleting:
		ok = obj.GetDeletionTimestamp() != nil
	case t.Condition != nil:
		ok = hasCondition(obj, *t.Condition)
	case t.Field != "":
		v, found, _ := unstructured.NestedFieldNoCopy(obj.Object, strings.Split(t.Field, ".")...)
		ok = found && v != nil
		if ok && t.Equals != nil {
			ok = sameJSON(v, t.Equals)
		}
	}
	return ok != t.Not, nil
}

func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func conditionsOf(obj *unstructured.Unstructured) []any {
	c, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	return c
}

func hasCondition(obj *unstructured.Unstructured, ct machine.ConditionTest) bool {
	for _, c := range conditionsOf(obj) {
		m, _ := c.(map[string]any)
		if m["type"] != ct.Type || m["status"] != ct.Status {
			continue
		}
		if ct.Reason != "" && m["reason"] != ct.Reason {
			continue
		}
		if ct.Current {
			g, _, _ := unstructured.NestedInt64(m, "observedGeneration")
			if g != obj.GetGeneration() {
				continue
			}
		}
		return true
	}
	return false
}

// setConditions makes obj's conditions those of state, keeping lastTransitionTime for
// conditions whose status did not change, and records observedGeneration. msg, when set,
// replaces the declared messages (terminal errors say what failed).
func (r *runner) setConditions(obj *unstructured.Unstructured, state, msg string) {
	old := map[string]map[string]any{}
	var out []any
	for _, c := range conditionsOf(obj) {
		if m, ok := c.(map[string]any); ok {
			t, _ := m["type"].(string)
			old[t] = m
		}
	}
	declared := map[string]bool{}
	gen := obj.GetGeneration()
	now := metav1.NewTime(r.e.o.Now()).UTC().Format("2006-01-02T15:04:05Z")
	for _, c := range r.m.States[state].Conditions {
		declared[c.Type] = true
		message := c.Message
		if msg != "" {
			message = msg
		}
		ltt := now
		if prev, ok := old[c.Type]; ok && prev["status"] == c.Status {
			if s, ok := prev["lastTransitionTime"].(string); ok {
				ltt = s
			}
		}
		out = append(out, map[string]any{
			"type": c.Type, "status": c.Status, "reason": c.Reason, "message": message,
			"lastTransitionTime": ltt, "observedGeneration": gen,
		})
	}
	// Conditions this state does not speak about (written by others) are kept as they are.
	for _, c := range conditionsOf(obj) {
		if m, ok := c.(map[string]any); ok && !declared[fmt.Sprint(m["type"])] {
			out = append(out, m)
		}
	}
	_ = unstructured.SetNestedSlice(obj.Object, out, "status", "conditions")
	_ = unstructured.SetNestedField(obj.Object, gen, "status", "observedGeneration")
}

// showsState reports whether obj already carries state's conditions for its generation, so an
// idle pass leaves messages written by an earlier transition alone.
func (r *runner) showsState(obj *unstructured.Unstructured, state string) bool {
	for _, c := range r.m.States[state].Conditions {
		if !hasCondition(obj, machine.ConditionTest{Type: c.Type, Status: c.Status, Reason: c.Reason, Current: true}) {
			return false
		}
	}
	return true
}

func statusOf(obj *unstructured.Unstructured) map[string]any {
	s, _, _ := unstructured.NestedMap(obj.Object, "status")
	return s
}

// writeStatus merge-patches the status subresource when it differs from before. A merge patch
// needs no resourceVersion, so finalizer patches made by actions earlier in the same pass do not
// turn it into a conflict; fields the pass removed are sent as null.
func (r *runner) writeStatus(ctx context.Context, obj *unstructured.Unstructured, before map[string]any) error {
	after := statusOf(obj)
	if equality.Semantic.DeepEqual(normalize(before), normalize(after)) {
		return nil
	}
	patch := map[string]any{}
	for k, v := range after {
		patch[k] = v
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			patch[k] = nil
		}
	}
	body, err := json.Marshal(map[string]any{"status": patch})
	if err != nil {
		return err
	}
	_, err = r.e.o.Dynamic.Resource(r.m.Resource).Namespace(obj.GetNamespace()).
		Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// normalize round-trips through JSON so int64 and float64 from different decoders compare equal.
func normalize(m map[string]any) any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func isNoTransition(err error) bool {
	var nt fsm.NoTransitionError
	return errors.As(err, &nt)
}
