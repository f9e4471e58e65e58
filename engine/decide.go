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

// Facts are what a pass may read besides the object: driver observations (memoized per pass)
// and related objects from the informer caches.
type Facts interface {
	Observe(name string) (Fact, error)
	// Related returns the related object of that name, nil when it is not in the cache.
	Related(name string) map[string]any
}

// Input is everything Decide looks at.
type Input struct {
	Object *unstructured.Unstructured
	Facts  Facts
	Now    time.Time
	// TerminalMarked says the engine remembers a terminal error for this object's generation
	// (machines that cannot write it to status still stay terminal).
	TerminalMarked bool
	// Retries is how many retries the key has had (the queue's count).
	Retries int
}

// Outcome is how a pass ends for the queue.
type Outcome string

// Outcomes of a step.
const (
	Done     Outcome = "done"     // forget the key; requeue after RequeueAfter when set
	Wait     Outcome = "pending"  // forget the key (no retry counted); requeue after RequeueAfter
	Retry    Outcome = "retry"    // back off (base..cap) and try again
	Terminal Outcome = "terminal" // enter the machine's terminal state
)

// Step is one decision: the state the object is in, the transition that fires (if any),
// the conditions the target state shows and how the pass ends.
type Step struct {
	From, To, Event string
	// Transition is the transition that fires; nil when none does.
	Transition *machine.Transition
	// Conditions are the target state's conditions, rendered (nil when the machine does not
	// own conditions or the state is terminal).
	Conditions []Condition
	Outcome    Outcome
	// RequeueAfter re-checks the key (the state's requeueAfter or the nearest timer).
	RequeueAfter time.Duration
	// Class is the error class of retry and terminal outcomes; Err the error.
	Class machine.ErrorClass
	Err   error
	// Blocked is the blocked outcome that chose To, for condition templates.
	Blocked *BlockedError
}

// Condition is a rendered condition (without timestamps and observedGeneration).
type Condition struct{ Type, Status, Reason, Message string }

// Decide is the pure decision step: derive the state, choose the transition, render the
// conditions. It performs no I/O besides asking in.Facts.
func Decide(m *machine.Machine, in Input) Step {
	ev := evaluator{m: m, in: in}
	from, err := ev.derive()
	if err != nil {
		return ErrorStep(m, Step{From: from, To: from}, err, in.Retries)
	}
	st := Step{From: from, To: from, Outcome: Done}
	if m.States[from].Terminal {
		return st
	}
	var wait time.Duration
	for i, t := range m.TransitionsOf(from) {
		if t.When != nil {
			ok, err := ev.test(*t.When, in.Object.Object)
			if err != nil {
				return ErrorStep(m, st, fmt.Errorf("%s: %w", t.Event, err), in.Retries)
			}
			if !ok {
				continue
			}
		}
		if t.After != nil {
			if rest := ev.remaining(*t.After); rest > 0 {
				if wait == 0 || rest < wait {
					wait = rest
				}
				continue
			}
		}
		st.Transition = &m.TransitionsOf(from)[i]
		st.Event, st.To = t.Event, t.To
		break
	}
	st.RequeueAfter = m.States[st.To].RequeueAfter
	if wait > 0 && (st.RequeueAfter == 0 || wait < st.RequeueAfter) && st.Transition == nil {
		st.RequeueAfter = wait
	}
	if st.Conditions, err = RenderConditions(m, st.To, in, nil); err != nil {
		return ErrorStep(m, st, err, in.Retries)
	}
	return st
}

// Derive returns the state the object is in (the first step of Decide), for read-only callers
// such as `draforge serve`: no transition is evaluated, so no observation runs unless a derive
// rule asks for one.
func Derive(m *machine.Machine, in Input) (string, error) {
	return evaluator{m: m, in: in}.derive()
}

// ErrorStep turns an error of a pass into its outcome: pending waits, blocked goes to the
// state the machine maps its reason to (or stays), API errors are classified and retried
// while their class is in the retry list and retries remain, else terminal.
func ErrorStep(m *machine.Machine, st Step, err error, retries int) Step {
	st.Err = err
	if p, ok := asPending(err); ok {
		st.Outcome, st.To, st.Transition = Wait, st.From, nil
		st.RequeueAfter = p.RequeueAfter
		if st.RequeueAfter == 0 {
			st.RequeueAfter = m.States[st.From].RequeueAfter
		}
		st.Conditions = nil
		return st
	}
	if _, ok := asBlocked(err); ok {
		// Decide cannot render for a blocked outcome without the pass's inputs; see Blocked.
		st.Outcome, st.To = Wait, st.From
		st.RequeueAfter = m.States[st.From].RequeueAfter
		st.Conditions = nil
		return st
	}
	st.Class = Classify(err)
	st.Conditions = nil
	if m.Backoff.IsRetry(st.Class) && retries < m.Backoff.MaxRetries {
		st.Outcome = Retry
		return st
	}
	// A terminal class, exhausted retries, or (impossible after load) a class in neither list.
	st.Outcome, st.To = Terminal, m.TerminalState
	return st
}

// BlockedStep is the step after a transition's action reported b: the state outcomes maps
// its reason to, with conditions rendered seeing .outcome; an unmapped reason stays in From.
func BlockedStep(m *machine.Machine, st Step, b *BlockedError, in Input) Step {
	to, ok := m.Outcomes[b.Reason]
	if !ok {
		return ErrorStep(m, st, b, in.Retries)
	}
	st.To, st.Blocked, st.Outcome, st.Err = to, b, Done, nil
	st.RequeueAfter = m.States[to].RequeueAfter
	var err error
	if st.Conditions, err = RenderConditions(m, to, in, b); err != nil {
		return ErrorStep(m, st, err, in.Retries)
	}
	return st
}

// RenderConditions renders state's conditions: per type the first entry whose when holds.
func RenderConditions(m *machine.Machine, state string, in Input, b *BlockedError) ([]Condition, error) {
	if !m.Status.Conditions || m.States[state].Terminal {
		return nil, nil
	}
	ev := evaluator{m: m, in: in}
	var out []Condition
	seen := map[string]bool{}
	for _, c := range m.States[state].Conditions {
		if seen[c.Type] {
			continue
		}
		if c.When != nil {
			ok, err := ev.test(*c.When, in.Object.Object)
			if err != nil {
				return nil, fmt.Errorf("condition %s: %w", c.Type, err)
			}
			if !ok {
				continue
			}
		}
		seen[c.Type] = true
		msg := ""
		if !c.Message.IsZero() {
			var err error
			if msg, err = c.Message.RenderString(TemplateData(m, in, b)); err != nil {
				return nil, fmt.Errorf("condition %s message: %w", c.Type, err)
			}
		}
		out = append(out, Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: msg})
	}
	return out, nil
}

// TemplateData is what templates see (see #Template in schemas/machine.cue).
func TemplateData(m *machine.Machine, in Input, b *BlockedError) map[string]any {
	outcome := map[string]any{"reason": "", "message": ""}
	if b != nil {
		outcome["reason"], outcome["message"] = b.Reason, b.Message
	}
	related := make(map[string]any, len(m.RelatedOrder))
	for _, n := range m.RelatedOrder {
		if o := in.Facts.Related(n); o != nil {
			related[n] = o
		} else {
			related[n] = nil
		}
	}
	return map[string]any{
		"object":   in.Object.Object,
		"related":  related,
		"outcome":  outcome,
		"facts":    factsView{in.Facts},
		"now":      in.Now.UTC().Format(time.RFC3339),
		"nowMicro": in.Now.UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
	}
}

// factsView gives templates {{.facts.Message "observation"}}.
type factsView struct{ f Facts }

// Message returns the observation's message ("" when it failed: the failure surfaces where
// the observation is tested).
func (v factsView) Message(name string) string {
	if v.f == nil {
		return ""
	}
	f, err := v.f.Observe(name)
	if err != nil {
		return ""
	}
	return f.Message
}

// evaluator evaluates tests and timers of one pass.
type evaluator struct {
	m  *machine.Machine
	in Input
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
func (e evaluator) remaining(t machine.Timer) time.Duration {
	obj := e.in.Object.Object
	if t.Since.Related != "" {
		obj = e.in.Facts.Related(t.Since.Related)
	}
	since, ok := timestamp(t.Since, obj)
	if !ok {
		return 0
	}
	d := t.Duration
	if t.Annotation != "" {
		if s, ok := e.in.Object.GetAnnotations()[t.Annotation]; ok {
			if ad, err := time.ParseDuration(s); err == nil && ad > 0 {
				d = ad
			}
		}
	}
	return since.Add(d + Jitter(string(e.in.Object.GetUID()), t.Jitter)).Sub(e.in.Now)
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
