package machine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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
		if v := c.raw.LookupPath(cuePath(sels[:n])); v.Exists() && v.Pos().IsValid() {
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

func (c *checker) test(t Test, sels ...any) {
	if t.Observe != "" && !c.l.known.observations[t.Observe] {
		c.errorf(append(sels, "observe"), "unknown observation %q", t.Observe)
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

// check validates m and expands from: ["*"] in place.
func (c *checker) check(m *Machine) {
	for i, t := range m.Triggers {
		if name, ok := strings.CutPrefix(t.Map, "driver:"); ok && !c.l.known.mappers[name] {
			c.errorf([]any{"triggers", i, "map"}, "unknown mapper %q", name)
		}
	}
	c.declared(m, m.Initial, "initial")
	if c.declared(m, m.TerminalState, "terminalState") && !m.States[m.TerminalState].Terminal {
		c.errorf([]any{"terminalState"}, "state %q must be marked terminal: true", m.TerminalState)
	}
	for i, d := range m.Derive {
		c.declared(m, d.State, "derive", i, "state")
		c.test(d.When, "derive", i, "when")
	}
	events := map[string]int{}
	for i, e := range m.Events {
		if j, dup := events[e.Name]; dup {
			c.errorf([]any{"events", i, "name"}, "duplicate event %q (first at events[%d])", e.Name, j)
			continue
		}
		events[e.Name] = i
		c.test(e.When, "events", i, "when")
	}
	c.transitions(m, events)
	c.reachable(m)
	c.backoff(m.Backoff)
}

func (c *checker) transitions(m *Machine, events map[string]int) {
	var open []string // non-terminal states, what "*" means
	for _, n := range m.StateOrder {
		if !m.States[n].Terminal {
			open = append(open, n)
		}
	}
	type edge struct{ event, from string }
	edges := map[edge]int{}
	for i := range m.Transitions {
		t := &m.Transitions[i]
		if _, ok := events[t.Event]; !ok {
			c.errorf([]any{"transitions", i, "event"}, "undeclared event %q", t.Event)
		}
		star := len(t.From) == 1 && t.From[0] == "*"
		if star {
			t.From = slices.Clone(open)
		}
		for j, f := range t.From {
			sels := []any{"transitions", i, "from", j}
			if star {
				sels = sels[:3]
			} else if c.declared(m, f, sels...) && m.States[f].Terminal {
				c.errorf(sels, "terminal state %q cannot have outgoing transitions", f)
			}
			// looplab/fsm keeps one target per (event, state); a second one would silently win.
			if k, dup := edges[edge{t.Event, f}]; dup {
				c.errorf(sels, "event %q from state %q is already handled by transitions[%d]", t.Event, f, k)
			} else {
				edges[edge{t.Event, f}] = i
			}
		}
		c.declared(m, t.To, "transitions", i, "to")
		for j, a := range t.Actions {
			if !c.l.known.actions[a] {
				c.errorf([]any{"transitions", i, "actions", j}, "unknown action %q", a)
			}
		}
	}
}

// reachable flags states an object can never be in: states are entered from initial, from
// terminalState (on terminal errors), from derive targets, and along transitions from those.
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
		for _, t := range m.Transitions {
			if slices.Contains(t.From, s) {
				queue = append(queue, t.To)
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
