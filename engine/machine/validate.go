package machine

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// checker does the semantic checks CUE cannot express for one decoded machine.
type checker struct {
	l      *loader
	file   string
	prefix string
	raw    cue.Value // the machine as written, for positions
	refs   []ref     // uses of related names, checked after decoding
}

// path turns selectors (string labels, int indices) into a CUE path.
func cuePath(sels []any) cue.Path {
	s := make([]cue.Selector, 0, len(sels))
	for _, x := range sels {
		switch x := x.(type) {
		case string:
			s = append(s, cue.Str(x))
		case int:
			s = append(s, cue.Index(x))
		}
	}
	return cue.MakePath(s...)
}

// at is the position of the value at sels as written, or of its nearest written ancestor
// when the value came from a schema default.
func (c *checker) at(sels []any) token.Pos {
	for n := len(sels); n > 0; n-- {
		if v := c.raw.LookupPath(cuePath(sels[:n])); v.Exists() && v.Pos().IsValid() && v.Pos().Filename() == c.file {
			return v.Pos()
		}
	}
	return c.raw.Pos()
}

func (c *checker) errorf(sels []any, format string, args ...any) {
	c.l.errorf(c.file, c.at(sels), "%s%s: %s", c.prefix, cuePath(sels), fmt.Sprintf(format, args...))
}

// validate records every schema error in v, the machine unified with #Machine, and
// reports whether there was any.
func (c *checker) validate(v cue.Value) bool {
	err := v.Validate(cue.Concrete(true), cue.Final())
	if err == nil {
		return false
	}
	c.cueErrors(err)
	// Validate does not always descend past a failing node: validate each top-level field
	// on its own too (repeats are dropped after sorting) and check closedness ourselves.
	if it, ferr := v.Fields(); ferr == nil {
		for it.Next() {
			c.cueErrors(it.Value().Validate(cue.Concrete(true), cue.Final()))
		}
	}
	c.closed(c.raw, c.l.schema, nil)
	return true
}

// closed reports fields of raw that schema does not allow. CUE skips its own closedness
// check on a struct that already has another error, which would hide a typo behind an
// unrelated mistake. Disjunctions (tests, defaults) are left to CUE's own messages.
func (c *checker) closed(raw, schema cue.Value, sels []any) {
	// Eval resolves references such as when: #Test to the disjunction they name.
	if op, _ := schema.Eval().Expr(); op == cue.OrOp {
		return
	}
	switch raw.IncompleteKind() {
	case cue.StructKind:
		it, err := raw.Fields()
		if err != nil {
			return
		}
		for it.Next() {
			sel := it.Selector()
			at := append(slices.Clone(sels), sel.Unquoted())
			s, ok := field(schema, sel)
			if !ok {
				c.errorf(at, "field not allowed")
				continue
			}
			c.closed(it.Value(), s, at)
		}
	case cue.ListKind:
		elem := schema.LookupPath(cue.MakePath(cue.AnyIndex))
		it, err := raw.List()
		if err != nil || !elem.Exists() {
			return
		}
		for i := 0; it.Next(); i++ {
			c.closed(it.Value(), elem, append(slices.Clone(sels), i))
		}
	}
}

// field is the schema of field sel of struct schema: declared (regular, required or
// optional) or allowed by a pattern.
func field(schema cue.Value, sel cue.Selector) (cue.Value, bool) {
	for _, s := range []cue.Selector{sel, sel.Required(), sel.Optional()} {
		if v := schema.LookupPath(cue.MakePath(s)); v.Exists() {
			return v, true
		}
	}
	if !schema.Allows(sel) {
		return cue.Value{}, false
	}
	return schema.LookupPath(cue.MakePath(cue.AnyString)), true
}

// cueErrors records schema errors at their first position in the machine's file or, when
// CUE only knows the schema's position (e.g. a missing required field), at the nearest
// written ancestor of the error's path.
func (c *checker) cueErrors(err error) {
	for _, e := range cueerrors.Errors(err) {
		var sels []any
		for _, p := range e.Path() {
			if p == "#Machine" && len(sels) == 0 {
				continue
			}
			if u, err := strconv.Unquote(p); err == nil { // labels come quoted as in CUE
				sels = append(sels, u)
			} else if i, err := strconv.Atoi(p); err == nil {
				sels = append(sels, i)
			} else {
				sels = append(sels, p)
			}
		}
		pos := c.at(sels)
		for _, p := range cueerrors.Positions(e) {
			if p.Filename() == c.file {
				pos = p
				break
			}
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if len(sels) > 0 {
			msg = cuePath(sels).String() + ": " + msg
		}
		c.l.errorf(c.file, pos, "%s%s", c.prefix, msg)
	}
}

// declared reports whether state n exists, recording an error at sels if not.
func (c *checker) declared(m *Machine, n string, sels ...any) bool {
	if _, ok := m.States[n]; !ok {
		c.errorf(sels, "undeclared state %q", n)
		return false
	}
	return true
}

// check validates the decoded machine m.
func (c *checker) check(m *Machine) {
	for i, t := range m.Triggers {
		if name, ok := strings.CutPrefix(t.Map, "driver:"); ok && !c.l.known.mappers[name] {
			c.errorf([]any{"triggers", i, "map"}, "unknown mapper %q", name)
		}
	}
	for _, r := range c.refs {
		if _, ok := m.Related[r.name]; !ok {
			c.errorf(r.sels, "unknown related object %q", r.name)
		}
	}
	c.declared(m, m.Initial, "initial")
	if c.declared(m, m.TerminalState, "terminalState") && !m.States[m.TerminalState].Terminal {
		c.errorf([]any{"terminalState"}, "state %q must be marked terminal: true", m.TerminalState)
	}
	for i, d := range m.Derive {
		c.declared(m, d.State, "derive", i, "state")
	}
	for _, reason := range slices.Sorted(maps.Keys(m.Outcomes)) {
		to := m.Outcomes[reason]
		if c.declared(m, to, "outcomes", reason, "to") {
			c.derivable(m, to, "outcomes", reason, "to")
		}
	}
	c.transitionList(m, m.AnyState, nil, "anyState")
	for _, n := range m.StateOrder {
		st := m.States[n]
		if st.Terminal && st.RequeueAfter > 0 {
			c.errorf([]any{"states", n, "requeueAfter"}, "terminal state %q cannot have timers", n)
		}
		if st.Terminal && len(st.On) > 0 {
			for i, t := range st.On {
				if t.After != nil {
					c.errorf([]any{"states", n, "on", i, "after"}, "terminal state %q cannot have timers", n)
				}
			}
			c.errorf([]any{"states", n, "on"}, "terminal state %q cannot have outgoing transitions", n)
			continue
		}
		c.transitionList(m, st.On, m.AnyState, "states", n, "on")
	}
	c.conditionsWritten(m)
	c.reachable(m)
	c.backoff(m.Backoff)
}

// transitionList checks one list of transitions: unique events (also against inherited,
// the anyState list), declared and derivable targets.
func (c *checker) transitionList(m *Machine, list, inherited []Transition, sels ...any) {
	seen := map[string]bool{}
	for _, t := range inherited {
		seen[t.Event] = true
	}
	for i, t := range list {
		at := append(slices.Clone(sels), i)
		// looplab/fsm keeps one target per (event, state); a second one would silently win.
		if seen[t.Event] {
			c.errorf(append(at, "event"), "event %q is already handled from this state", t.Event)
		}
		seen[t.Event] = true
		if c.declared(m, t.To, append(at, "to")...) {
			c.derivable(m, t.To, append(at, "to")...)
		}
	}
}

// derivable reports a target state the next pass could not derive back: the object would show
// it for one status write and lose it on the next pass.
func (c *checker) derivable(m *Machine, state string, sels ...any) {
	if state == m.Initial {
		return
	}
	for _, d := range m.Derive {
		if d.State == state {
			return
		}
	}
	c.errorf(sels, "state %q is not recognised by any derive rule (nor initial): it would be lost on the next pass", state)
}

// conditionsWritten rejects patch actions writing status conditions no state declares when
// the engine owns the object's conditions: the next pass would not know them.
func (c *checker) conditionsWritten(m *Machine) {
	if !m.Status.Conditions {
		return
	}
	declared := map[string]bool{}
	for _, st := range m.States {
		for _, cd := range st.Conditions {
			declared[cd.Type] = true
		}
	}
	check := func(list []Transition, sels ...any) {
		for i, t := range list {
			for j, a := range t.Actions {
				if a.Patch == nil || a.Patch.Status == nil {
					continue
				}
				conds, _ := a.Patch.Status.fields["conditions"]
				if conds == nil {
					continue
				}
				for k, e := range conds.list {
					if e.isMap && e.fields["type"] != nil {
						if typ, ok := e.fields["type"].literal.(string); ok && !declared[typ] {
							c.errorf(append(slices.Clone(sels), i, "actions", j, "patch", "status", "conditions", k, "type"),
								"condition %q is written by an action but declared by no state", typ)
						}
					}
				}
			}
		}
	}
	check(m.AnyState, "anyState")
	for _, n := range m.StateOrder {
		check(m.States[n].On, "states", n, "on")
	}
}

// reachable flags states an object can never be in: states are entered from initial, from
// terminalState (on terminal errors), from derive targets, and along transitions and blocked
// outcomes from those.
func (c *checker) reachable(m *Machine) {
	seen := map[string]bool{}
	queue := []string{m.Initial, m.TerminalState}
	for _, d := range m.Derive {
		queue = append(queue, d.State)
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if seen[s] {
			continue
		}
		seen[s] = true
		for _, t := range m.TransitionsOf(s) {
			queue = append(queue, t.To)
		}
		if !m.States[s].Terminal {
			for _, to := range m.Outcomes {
				queue = append(queue, to)
			}
		}
	}
	for _, n := range m.StateOrder {
		if !seen[n] {
			c.errorf([]any{"states", n}, "state %q is unreachable (not initial, terminalState, a derive target, nor reached by a transition)", n)
		}
	}
}

func (c *checker) backoff(b Backoff) {
	for _, class := range AllErrorClasses {
		r, t := slices.Index(b.Retry, class), slices.Index(b.Terminal, class)
		switch {
		case r >= 0 && t >= 0:
			// Point at the list the user wrote; the other one may be a default.
			at := []any{"backoff", "terminal", t}
			if c.raw.LookupPath(cuePath([]any{"backoff", "retry", r})).Exists() {
				at = []any{"backoff", "retry", r}
			}
			c.errorf(at, "error class %s is in both retry and terminal", class)
		case r < 0 && t < 0:
			c.errorf([]any{"backoff"}, "error class %s is in neither retry nor terminal", class)
		}
	}
	if b.Base > b.Cap {
		c.errorf([]any{"backoff", "base"}, "base %s exceeds cap %s", b.Base, b.Cap)
	}
}
