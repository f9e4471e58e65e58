package machine

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/draforge/draforge/machines"
	"github.com/draforge/draforge/schemas"
)

// Names are the driver functions a machine may refer to; anything else is a load error.
type Names struct {
	Actions      []string
	Observations []string
	Mappers      []string
}

// Error is one problem found while loading, at the position of the offending CUE value.
type Error struct {
	File         string
	Line, Column int
	Msg          string
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg) }

// Errors is every problem found by one load, sorted by position.
type Errors []*Error

func (l Errors) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap lets errors.As reach each *Error.
func (l Errors) Unwrap() []error {
	s := make([]error, len(l))
	for i, e := range l {
		s[i] = e
	}
	return s
}

// Default loads the built-in machines embedded from machines/.
func Default(known Names) ([]*Machine, error) {
	return load(machines.FS, "machines", known)
}

// LoadDir loads every *.cue file in dir, e.g. a --machines override or a mounted ConfigMap.
func LoadDir(dir string, known Names) ([]*Machine, error) {
	return load(os.DirFS(dir), dir, known)
}

// Load loads and validates every *.cue file at the top of files. It returns all problems
// at once, each with the file:line:col of the value at fault.
func Load(files fs.FS, known Names) ([]*Machine, error) {
	return load(files, "", known)
}

var machineName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

type loader struct {
	ctx    *cue.Context
	schema cue.Value // #Machine
	known  struct{ actions, observations, mappers map[string]bool }
	seen   map[string]token.Pos // machine name → where first defined
	errs   Errors
}

// load is Load with prefix joined to file names in messages and Machine.Source.
func load(files fs.FS, prefix string, known Names) ([]*Machine, error) {
	// A fresh context per load: contexts only grow, and reloads must not share state.
	l := &loader{ctx: cuecontext.New(), seen: map[string]token.Pos{}}
	l.known.actions = set(known.Actions)
	l.known.observations = set(known.Observations)
	l.known.mappers = set(known.Mappers)
	if err := l.compileSchema(); err != nil {
		return nil, err
	}
	names, err := fs.Glob(files, "*.cue")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []*Machine
	for _, name := range names {
		out = append(out, l.file(files, name, path.Join(prefix, name))...)
	}
	if len(l.errs) > 0 {
		slices.SortStableFunc(l.errs, func(a, b *Error) int {
			return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line),
				cmp.Compare(a.Column, b.Column), cmp.Compare(a.Msg, b.Msg))
		})
		l.errs = slices.CompactFunc(l.errs, func(a, b *Error) bool { return *a == *b })
		return nil, l.errs
	}
	return out, nil
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// compileSchema builds the whole schemas package (other files may live beside machine.cue)
// and picks #Machine out of it.
func (l *loader) compileSchema() error {
	inst := build.NewContext().NewInstance("schemas", nil)
	names, err := fs.Glob(schemas.FS, "*.cue")
	if err != nil {
		return err
	}
	for _, name := range names {
		src, err := schemas.FS.ReadFile(name)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile("schemas/"+name, src)
		if err != nil {
			return fmt.Errorf("schema: %s", cueerrors.Details(err, nil))
		}
		if err := inst.AddSyntax(f); err != nil {
			return fmt.Errorf("schema: %s", cueerrors.Details(err, nil))
		}
	}
	v := l.ctx.BuildInstance(inst)
	l.schema = v.LookupPath(cue.ParsePath("#Machine"))
	if err := l.schema.Err(); err != nil {
		return fmt.Errorf("schema: %s", cueerrors.Details(err, nil))
	}
	return nil
}

// errorf records a problem at pos, falling back to the start of file when pos is unknown.
func (l *loader) errorf(file string, pos token.Pos, format string, args ...any) {
	e := &Error{File: file, Line: 1, Column: 1, Msg: fmt.Sprintf(format, args...)}
	if pos.IsValid() {
		p := pos.Position()
		e.File, e.Line, e.Column = p.Filename, p.Line, p.Column
	}
	l.errs = append(l.errs, e)
}

// cueErrors records CUE errors of a file that has no machine to attribute them to.
func (l *loader) cueErrors(file string, err error) {
	for _, e := range cueerrors.Errors(err) {
		pos := token.NoPos
		if ps := cueerrors.Positions(e); len(ps) > 0 && ps[0].Filename() == file {
			pos = ps[0]
		}
		format, args := e.Msg()
		l.errorf(file, pos, "%s", fmt.Sprintf(format, args...))
	}
}

// file loads the machines of one file. CUE must never take the process down over a bad
// file, so a panic becomes an error at the file's start.
func (l *loader) file(files fs.FS, name, display string) (out []*Machine) {
	defer func() {
		if r := recover(); r != nil {
			out = nil
			l.errorf(display, token.NoPos, "internal error evaluating file: %v", r)
		}
	}()
	src, err := fs.ReadFile(files, name)
	if err != nil {
		l.errorf(display, token.NoPos, "%v", err)
		return nil
	}
	f, err := parser.ParseFile(display, src)
	if err != nil {
		l.cueErrors(display, err)
		return nil
	}
	if f.PackageName() != "machines" {
		l.errorf(display, f.Pos(), "machine files must be in package machines, not %q", f.PackageName())
		return nil
	}
	v := l.ctx.BuildFile(f)
	if err := v.Err(); err != nil {
		l.cueErrors(display, err)
		return nil
	}
	it, err := v.Fields()
	if err != nil {
		l.cueErrors(display, err)
		return nil
	}
	found := false
	for it.Next() {
		if it.Selector().String() != "machine" {
			l.errorf(display, it.Value().Pos(), "unexpected top-level field %s: machine files declare only machine: <name>: {...}", it.Selector())
			continue
		}
		found = true
		ms, err := it.Value().Fields()
		if err != nil {
			l.errorf(display, it.Value().Pos(), "machine must be a struct of machines by name")
			continue
		}
		for ms.Next() {
			if m := l.machine(display, ms.Selector().Unquoted(), ms.Value()); m != nil {
				out = append(out, m)
			}
		}
	}
	if !found {
		l.errorf(display, f.Pos(), "no machine declared: want machine: <name>: {...}")
	}
	return out
}

// spec is the CUE shape of a machine where it differs from Machine (durations, state order).
type spec struct {
	Resource   schema.GroupVersionResource
	Namespaced bool
	Status     StatusPolicy
	Triggers   []Trigger
	States     map[string]struct {
		Conditions   []Condition
		Terminal     bool
		RequeueAfter string
	}
	Initial       string
	Derive        []DeriveRule
	Events        []Event
	Transitions   []Transition
	TerminalState string
	Backoff       struct {
		Base, Cap       string
		MaxRetries      int
		Retry, Terminal []ErrorClass
	}
	Workers      int
	HistoryLimit int
}

// machine validates and decodes one machine. raw is the machine as written (no schema), so
// positions found in it always point into the machine's own file.
func (l *loader) machine(file, name string, raw cue.Value) *Machine {
	start := len(l.errs)
	if !machineName.MatchString(name) {
		l.errorf(file, raw.Pos(), "machine name %q must be lower-kebab-case", name)
	}
	if first, dup := l.seen[name]; dup {
		p := first.Position()
		l.errorf(file, raw.Pos(), "machine %q already defined at %s:%d:%d", name, p.Filename, p.Line, p.Column)
		return nil
	}
	l.seen[name] = raw.Pos()

	c := &checker{l: l, file: file, prefix: "machine " + name + ": ", raw: raw}
	v := l.schema.Unify(raw)
	if c.validate(v) {
		return nil
	}
	var s spec
	if err := v.Decode(&s); err != nil {
		c.cueErrors(err)
		return nil
	}
	m := &Machine{
		Name:          name,
		Source:        file,
		Resource:      s.Resource,
		Namespaced:    s.Namespaced,
		Status:        s.Status,
		Triggers:      s.Triggers,
		States:        map[string]State{},
		Initial:       s.Initial,
		Derive:        s.Derive,
		Events:        s.Events,
		Transitions:   s.Transitions,
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
	}
	// Decode loses field order; the states struct keeps it.
	it, err := v.LookupPath(cue.ParsePath("states")).Fields()
	if err != nil {
		c.cueErrors(err)
		return nil
	}
	for it.Next() {
		n := it.Selector().Unquoted()
		st := s.States[n]
		var after time.Duration
		if st.RequeueAfter != "" {
			after = c.duration(st.RequeueAfter, "states", n, "requeueAfter")
		}
		m.StateOrder = append(m.StateOrder, n)
		m.States[n] = State{Name: n, Conditions: st.Conditions, Terminal: st.Terminal, RequeueAfter: after}
	}
	c.check(m)
	if len(l.errs) > start {
		return nil
	}
	return m
}
