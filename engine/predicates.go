package engine

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/engine/machine"
)

// evaluator evaluates the CUE tests and timers of one pass against the decoded object, its
// related objects and the drivers' observations (Facts). It is part of the pure step.
type evaluator struct {
	m  *machine.Machine
	in Input
	// recheck, when not nil, gathers the nearest RecheckAfter of the facts observed.
	recheck *time.Duration
}

// Selects reports whether m's selector.when holds for obj (true without one). The loader
// allows only tests over the object itself there, so no facts are needed.
func Selects(m *machine.Machine, obj map[string]any) bool {
	if m.SelectorWhen == nil {
		return true
	}
	ok, err := evaluator{m: m}.test(*m.SelectorWhen, obj)
	return ok && err == nil
}

func (e evaluator) derive() (string, error) {
	if e.in.TerminalMarked {
		return e.m.TerminalState, nil
	}
	for _, d := range e.m.Derive {
		ok, err := e.test(d.When, e.in.Object.Object)
		if err != nil {
			return e.m.Initial, fmt.Errorf("derive %s: %w", d.State, err)
		}
		if ok {
			return d.State, nil
		}
	}
	return e.m.Initial, nil
}

// test evaluates t against obj (the object, or a related object with t.Of).
func (e evaluator) test(t machine.Test, obj map[string]any) (bool, error) {
	if t.Of != "" {
		obj = e.in.Facts.Related(t.Of)
		if obj == nil {
			return t.Not, nil
		}
	}
	var ok bool
	switch {
	case t.Observe != "":
		f, err := e.in.Facts.Observe(t.Observe)
		if err != nil {
			return false, fmt.Errorf("observation %s: %w", t.Observe, err)
		}
		ok = f.Holds
		if r := f.RecheckAfter; r > 0 && e.recheck != nil && (*e.recheck == 0 || r < *e.recheck) {
			*e.recheck = r
		}
	case t.Deleting:
		_, ok = machine.Path{Steps: []machine.Step{{Key: "metadata"}, {Key: "deletionTimestamp"}}}.Get(obj)
	case t.Condition != nil:
		ok = hasCondition(obj, *t.Condition)
	case len(t.Field.Steps) > 0:
		v, found := t.Field.Get(obj)
		ok = compare(t, v, found)
	case t.Label != "":
		v, found := metaValue(obj, "labels", t.Label)
		ok = compare(t, v, found)
	case t.Annotation != "":
		v, found := metaValue(obj, "annotations", t.Annotation)
		ok = compare(t, v, found)
	case t.Age:
		ts, found := timestamp(t.AgeField, obj)
		ok = found && e.in.Now.Sub(ts) > t.AgeOver
	case t.Exists != "":
		ok = e.in.Facts.Related(t.Exists) != nil
	case t.IsAll:
		ok = true
		for _, x := range t.All {
			r, err := e.test(x, obj)
			if err != nil {
				return false, err
			}
			if !r {
				ok = false
				break
			}
		}
	case t.IsAny:
		for _, x := range t.Any {
			r, err := e.test(x, obj)
			if err != nil {
				return false, err
			}
			if r {
				ok = true
				break
			}
		}
	}
	return ok != t.Not, nil
}

func metaValue(obj map[string]any, kind, key string) (any, bool) {
	md, _ := obj["metadata"].(map[string]any)
	m, _ := md[kind].(map[string]any)
	v, ok := m[key]
	return v, ok
}

// compare applies a test's comparison to a value (presence when there is none).
func compare(t machine.Test, v any, found bool) bool {
	if !found {
		return false
	}
	switch {
	case t.HasEquals:
		return sameJSON(v, t.Equals)
	case t.In != nil:
		for _, x := range t.In {
			if sameJSON(v, x) {
				return true
			}
		}
		return false
	case t.AtLeast != nil:
		n, ok := number(v)
		return ok && n >= *t.AtLeast
	}
	return true
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case int:
		return float64(v), true
	case string:
		n, err := strconv.ParseFloat(v, 64)
		return n, err == nil
	}
	return 0, false
}

func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// timestamp reads a metav1.Time or MicroTime string at p.
func timestamp(p machine.Path, obj map[string]any) (time.Time, bool) {
	v, ok := p.Get(obj)
	s, isStr := v.(string)
	if !ok || !isStr {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// remaining is how long until the timer is due (<= 0: due). A missing timestamp is due now.
// never is true when the object has no timer (an annotation-only timer without the annotation).
func (e evaluator) remaining(t machine.Timer) (rest time.Duration, never bool) {
	d, ok := t.Length(e.in.Object.GetAnnotations())
	if !ok {
		return 0, true
	}
	obj := e.in.Object.Object
	if t.Since.Related != "" {
		obj = e.in.Facts.Related(t.Since.Related)
	}
	since, ok := timestamp(t.Since, obj)
	if !ok {
		return 0, false
	}
	return since.Add(d + Jitter(string(e.in.Object.GetUID()), t.Jitter)).Sub(e.in.Now), false
}

// Jitter is a fixed fraction of max per object (FNV hash of its UID), so every replica and
// every restart computes the same due time.
func Jitter(uid string, max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return time.Duration(h.Sum64() % uint64(max))
}

func conditionsOf(obj map[string]any) []any {
	st, _ := obj["status"].(map[string]any)
	c, _ := st["conditions"].([]any)
	return c
}

func hasCondition(obj map[string]any, ct machine.ConditionTest) bool {
	gen, _, _ := unstructured.NestedInt64(obj, "metadata", "generation")
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
			if g != gen {
				continue
			}
		}
		return true
	}
	return false
}
