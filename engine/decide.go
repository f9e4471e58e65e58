package engine

import (
	"encoding/json"
	"fmt"
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
	// own conditions or the object rests in a terminal state: nothing is written then).
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
	ev := evaluator{m: m, in: in, recheck: new(time.Duration)}
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
			rest, never := ev.remaining(*t.After)
			if never {
				continue
			}
			if rest > 0 {
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
	// A fact that changes by itself is looked at again when it does.
	if r := *ev.recheck; r > 0 && (st.RequeueAfter == 0 || r < st.RequeueAfter) {
		st.RequeueAfter = r
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
	if !m.Status.Conditions {
		return nil, nil
	}
	ev := evaluator{m: m, in: in}
	var out []Condition
	var data map[string]any // built once, on the first message that is a template
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
			if data == nil && !c.Message.IsLiteral() {
				data = TemplateData(m, in, b)
			}
			if msg, err = c.Message.RenderString(data); err != nil {
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
		"facts":    &factsView{f: in.Facts},
		"now":      in.Now.UTC().Format(time.RFC3339),
		"nowMicro": in.Now.UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
	}
}

// factsView gives templates {{.facts.Message "observation"}} and {{.facts.Value "observation"}}.
type factsView struct {
	f Facts
	// values are the observations' values in JSON form, converted once per render data
	// (allocated on first use: most renders read no value).
	values map[string]any
}

// Message returns the observation's message ("" when it failed: the failure surfaces where
// the observation is tested).
func (v *factsView) Message(name string) string {
	if v.f == nil {
		return ""
	}
	f, err := v.f.Observe(name)
	if err != nil {
		return ""
	}
	return f.Message
}

// Value returns the observation's Value in JSON form (see Fact.Value). A failed observation
// fails the render with its error: a template that reads its data cannot do without it.
func (v *factsView) Value(name string) (any, error) {
	if v.f == nil {
		return nil, nil
	}
	if j, ok := v.values[name]; ok {
		return j, nil
	}
	f, err := v.f.Observe(name)
	if err != nil {
		return nil, fmt.Errorf("observation %s: %w", name, err)
	}
	j, err := jsonValue(f.Value)
	if err != nil {
		return nil, fmt.Errorf("observation %s: value: %w", name, err)
	}
	if v.values == nil {
		v.values = map[string]any{}
	}
	v.values[name] = j
	return j, nil
}

// jsonValue returns v as templates see objects: JSON-like maps, lists and scalars.
func jsonValue(v any) (any, error) {
	switch v.(type) {
	case nil, string, bool, float64, map[string]any, []any:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}
