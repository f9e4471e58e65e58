package machine

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// decode turns the JSON shape of a machine into a Machine: durations parsed, paths parsed,
// templates compiled. Every problem is recorded at the position of the value at fault.
func (c *checker) decode(name string, s *spec) *Machine {
	m := &Machine{
		Name:          name,
		Source:        c.file,
		Resource:      s.Resource,
		Namespaced:    s.Namespaced,
		Optional:      s.Optional,
		Status:        s.Status,
		Related:       map[string]Related{},
		States:        map[string]State{},
		Initial:       s.Initial,
		Outcomes:      map[string]string{},
		TerminalState: s.TerminalState,
		Backoff: Backoff{
			Base:       c.duration(s.Backoff.Base, "backoff", "base"),
			Cap:        c.duration(s.Backoff.Cap, "backoff", "cap"),
			MaxRetries: s.Backoff.MaxRetries,
			Retry:      s.Backoff.Retry,
			Terminal:   s.Backoff.Terminal,
		},
		Workers:      s.Workers,
		HistoryLimit: s.HistoryLimit,
		// Absent (a machine read without the schema's default) records them.
		NoTransitionEvents: s.Events.Transitions != nil && !*s.Events.Transitions,
	}
	if s.Selector != nil {
		m.Selector, m.FieldSelector, m.SelectorWithout = s.Selector.Labels, s.Selector.Fields, s.Selector.Without
		if s.Selector.When != nil {
			t := c.test(*s.Selector.When, "selector", "when")
			c.objectOnly(t, "selector", "when")
			m.SelectorWhen = &t
		}
	}
	for i, t := range s.Triggers {
		tr := Trigger{Resource: t.Resource, Map: t.Map, NameLabel: t.NameLabel, NamespaceLabel: t.NamespaceLabel,
			Name: t.Name, On: t.On}
		for j, f := range t.Fields {
			tr.Fields = append(tr.Fields, c.path(f, false, "triggers", i, "fields", j))
		}
		m.Triggers = append(m.Triggers, tr)
	}
	for n, r := range s.Related {
		rel := Related{Name: n, Resource: r.Resource, NameT: c.str(r.Name, "related", n, "name")}
		if r.Namespace != "" {
			rel.NamespaceT = c.str(r.Namespace, "related", n, "namespace")
		}
		m.Related[n] = rel
	}
	for reason, o := range s.Outcomes {
		m.Outcomes[reason] = o.To
	}
	for n, st := range s.States {
		state := State{Name: n, Terminal: st.Terminal}
		if st.RequeueAfter != "" {
			state.RequeueAfter = c.duration(st.RequeueAfter, "states", n, "requeueAfter")
		}
		for i, cd := range st.Conditions {
			cond := Condition{Type: cd.Type, Status: cd.Status, Reason: cd.Reason,
				Message: c.str(cd.Message, "states", n, "conditions", i, "message")}
			if cd.When != nil {
				t := c.test(*cd.When, "states", n, "conditions", i, "when")
				cond.When = &t
			}
			state.Conditions = append(state.Conditions, cond)
		}
		for i, t := range st.On {
			state.On = append(state.On, c.transition(t, "states", n, "on", i))
		}
		m.States[n] = state
	}
	for i, d := range s.Derive {
		m.Derive = append(m.Derive, DeriveRule{State: d.State, When: c.test(d.When, "derive", i, "when")})
	}
	for i, t := range s.AnyState {
		m.AnyState = append(m.AnyState, c.transition(t, "anyState", i))
	}
	return m
}

func (c *checker) test(s specTest, sels ...any) Test {
	sels = slices.Clone(sels)
	t := Test{Observe: s.Observe, Deleting: s.Deleting, Label: s.Label, Annotation: s.Annotation,
		In: s.In, AtLeast: s.AtLeast, Condition: s.Condition, Exists: s.Exists, Of: s.Of, Not: s.Not}
	if s.Field != "" {
		t.Field = c.path(s.Field, false, append(sels, "field")...)
	}
	if len(s.Equals) > 0 {
		t.HasEquals = true
		_ = json.Unmarshal(s.Equals, &t.Equals)
	}
	if s.Age != nil {
		t.Age = true
		t.AgeField = c.path(s.Age.Field, false, append(sels, "age", "field")...)
		t.AgeOver = c.duration(s.Age.Over, append(sels, "age", "over")...)
	}
	if s.All != nil {
		t.IsAll = true
		for i, x := range *s.All {
			t.All = append(t.All, c.test(x, append(sels, "all", i)...))
		}
	}
	if s.Any != nil {
		t.IsAny = true
		for i, x := range *s.Any {
			t.Any = append(t.Any, c.test(x, append(sels, "any", i)...))
		}
	}
	if t.Of != "" {
		c.refs = append(c.refs, ref{t.Of, append(sels, "of")})
	}
	if t.Exists != "" {
		c.refs = append(c.refs, ref{t.Exists, append(sels, "exists")})
	}
	if t.Observe != "" && !c.l.known.observations[t.Observe] {
		c.errorf(append(sels, "observe"), "unknown observation %q", t.Observe)
	}
	return t
}

// objectOnly reports the parts of t that need more than the object itself: a selector's test
// runs on informer events, where no pass has gathered observations or related objects, and
// it must not change with time alone (nothing would re-check it).
func (c *checker) objectOnly(t Test, sels ...any) {
	switch {
	case t.Observe != "":
		c.errorf(append(slices.Clone(sels), "observe"), "selector.when tests the object alone: observation %q is not available here", t.Observe)
	case t.Of != "":
		c.errorf(append(slices.Clone(sels), "of"), "selector.when tests the object alone: related object %q is not available here", t.Of)
	case t.Exists != "":
		c.errorf(append(slices.Clone(sels), "exists"), "selector.when tests the object alone: related object %q is not available here", t.Exists)
	case t.Age:
		c.errorf(append(slices.Clone(sels), "age"), "selector.when tests the object alone: an age test changes with time, and nothing re-checks it")
	}
	for i, x := range t.All {
		c.objectOnly(x, append(slices.Clone(sels), "all", i)...)
	}
	for i, x := range t.Any {
		c.objectOnly(x, append(slices.Clone(sels), "any", i)...)
	}
}

func (c *checker) transition(s specTransition, sels ...any) Transition {
	sels = slices.Clone(sels)
	t := Transition{Event: s.Event, To: s.To}
	if s.When != nil {
		w := c.test(*s.When, append(sels, "when")...)
		t.When = &w
	}
	if s.After != nil {
		at := append(sels, "after")
		tm := &Timer{Since: c.path(s.After.Since, true, append(at, "since")...), Annotation: s.After.Annotation}
		// Without a duration the annotation alone sets the timer (#Timer requires one of them).
		if s.After.Duration != "" {
			tm.Duration = c.duration(s.After.Duration, append(at, "duration")...)
		}
		if s.After.Jitter != "" {
			tm.Jitter = c.duration(s.After.Jitter, append(at, "jitter")...)
		}
		if tm.Since.Related != "" {
			c.refs = append(c.refs, ref{tm.Since.Related, append(at, "since")})
		}
		t.After = tm
	}
	for i, raw := range s.Actions {
		t.Actions = append(t.Actions, c.action(raw, append(sels, "actions", i)...))
	}
	return t
}

func (c *checker) action(raw json.RawMessage, sels ...any) Action {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if !c.l.known.actions[name] {
			c.errorf(sels, "unknown action %q", name)
		}
		return Action{Driver: name}
	}
	var a struct {
		Patch *struct {
			Status   map[string]any
			Metadata map[string]any
		}
		Apply *struct {
			Resource        schema.GroupVersionResource
			Namespace, Name string
			Object          map[string]any
			Patch           map[string]any
		}
		Finalizer *FinalizerAction
		Delete    bool
		// GracePeriodSeconds is the delete action's grace period (nil: the resource's default).
		GracePeriodSeconds *int64
		Event              *struct{ Type, Reason, Message string }
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		c.errorf(sels, "%v", err)
		return Action{}
	}
	out := Action{Finalizer: a.Finalizer, Delete: a.Delete, GracePeriodSeconds: a.GracePeriodSeconds}
	switch {
	case a.Patch != nil:
		out.Patch = &PatchAction{}
		if a.Patch.Status != nil {
			out.Patch.Status = c.compile(a.Patch.Status, append(sels, "patch", "status")...)
		}
		if a.Patch.Metadata != nil {
			out.Patch.Metadata = c.compile(a.Patch.Metadata, append(sels, "patch", "metadata")...)
		}
	case a.Apply != nil:
		at := append(slices.Clone(sels), "apply")
		out.Apply = &ApplyAction{Resource: a.Apply.Resource, Name: c.str(a.Apply.Name, append(at, "name")...),
			Object: c.compile(a.Apply.Object, append(at, "object")...)}
		if a.Apply.Patch != nil {
			out.Apply.Patch = c.compile(a.Apply.Patch, append(at, "patch")...)
		}
		if a.Apply.Namespace != "" {
			out.Apply.Namespace = c.str(a.Apply.Namespace, append(at, "namespace")...)
		}
	case a.Event != nil:
		out.Event = &EventAction{Type: a.Event.Type, Reason: a.Event.Reason,
			Message: c.str(a.Event.Message, append(sels, "event", "message")...)}
	}
	return out
}

// relatedRef finds `.related.<name>` in template text, to check the names at load.
var relatedRef = regexp.MustCompile(`\.related\.([a-zA-Z0-9_]+)`)

func (c *checker) compile(v any, sels ...any) *Template {
	t, err := CompileTemplate(v)
	if err != nil {
		c.errorf(sels, "%v", err)
		return nil
	}
	c.scanRefs(v, sels)
	return t
}

func (c *checker) str(s string, sels ...any) *Template {
	return c.compile(s, sels...)
}

// scanRefs records the related names the string leaves of v mention.
func (c *checker) scanRefs(v any, sels []any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			c.scanRefs(e, append(slices.Clone(sels), k))
		}
	case []any:
		for i, e := range v {
			c.scanRefs(e, append(slices.Clone(sels), i))
		}
	case string:
		if strings.Contains(v, "{{") {
			for _, m := range relatedRef.FindAllStringSubmatch(v, -1) {
				c.refs = append(c.refs, ref{m[1], slices.Clone(sels)})
			}
		}
	}
}

func (c *checker) path(s string, allowRelated bool, sels ...any) Path {
	p, err := ParsePath(s, allowRelated)
	if err != nil {
		c.errorf(sels, "%v", err)
	}
	return p
}

func (c *checker) duration(s string, sels ...any) time.Duration {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		c.errorf(sels, "invalid duration %q: %v", s, err)
	case d <= 0:
		c.errorf(sels, "duration %q must be positive", s)
	}
	return d
}

// ref is a use of a related object's name, checked once the machine is decoded.
type ref struct {
	name string
	sels []any
}
