package machine

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/draforge/draforge/schemas"
)

// Names are the driver functions a machine may refer to; anything else is a load error.
type Names struct {
	Actions      []string
	Observations []string
	Mappers      []string
	// Pruned are the caches that drop fields of their objects: a machine that reads a field
	// one of them drops is a load error naming the field (see Pruned).
	Pruned []Pruned
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

// LoadDir loads every *.cue file in dir, e.g. a --machines override or a mounted ConfigMap.
// A missing directory, a file that is not one, or a directory without *.cue files is an error
// naming dir: fs.Glob ignores I/O errors, so without this check they would load no machine.
func LoadDir(dir string, known Names) ([]*Machine, error) {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: no such directory", dir)
	case err != nil:
		return nil, err // *fs.PathError names dir
	case !info.IsDir():
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	if _, err := os.ReadDir(dir); err != nil {
		return nil, err // unreadable: *fs.PathError names dir
	}
	return LoadFS(os.DirFS(dir), dir, known)
}

// Missing returns the names in want that no machine of ms has, in want's order.
func Missing(ms []*Machine, want []string) []string {
	var out []string
	for _, name := range want {
		if !slices.ContainsFunc(ms, func(m *Machine) bool { return m.Name == name }) {
			out = append(out, name)
		}
	}
	return out
}

// Load loads and validates every *.cue file at the top of files. It returns all problems
// at once, each with the file:line:col of the value at fault.
func Load(files fs.FS, known Names) ([]*Machine, error) {
	return LoadFS(files, "", known)
}

var machineName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

type loader struct {
	ctx    *cue.Context
	schema cue.Value // #Machine
	// bctx and schemaInst resolve machine files' import of the schemas package.
	bctx       *build.Context
	schemaInst *build.Instance
	known      struct{ actions, observations, mappers map[string]bool }
	pruned     map[prunedKey]compiledPruned
	seen       map[string]token.Pos // machine name → where first defined
	errs       Errors
}

// LoadFS is Load with dir, where files come from, joined to file names in messages and
// Machine.Source (e.g. "machines" for the product's embedded machines).
func LoadFS(files fs.FS, dir string, known Names) ([]*Machine, error) {
	pruned, err := compilePruned(known.Pruned)
	if err != nil {
		return nil, err
	}
	// A fresh context per load: contexts only grow, and reloads must not share state.
	l := &loader{ctx: cuecontext.New(), seen: map[string]token.Pos{}, pruned: pruned}
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
	if len(names) == 0 {
		// Loading nothing is never what was meant: a controller without machines reports
		// Ready and reconciles nothing.
		return nil, fmt.Errorf("%s: no machine files (*.cue)", cmp.Or(dir, "."))
	}
	slices.Sort(names)
	var out []*Machine
	for _, name := range names {
		out = append(out, l.file(files, name, path.Join(dir, name))...)
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

// SchemaImport is the import path machine files use for the schemas package; the loader
// resolves it to the schemas embedded in the binary, so a --machines directory or the chart's
// ConfigMap need no cue.mod.
const SchemaImport = "github.com/draforge/draforge/schemas"

// compileSchema builds the machine DSL's file of the schemas package (schemas.Machine), and
// only it: the scenario and pool schemas beside it are the product's, not the engine's, so a
// machine file that reaches for them through the import fails to load. It picks #Machine out.
func (l *loader) compileSchema() error {
	l.bctx = build.NewContext()
	l.schemaInst = l.bctx.NewInstance("schemas", nil)
	f, err := parser.ParseFile("schemas/"+schemas.MachineFile, schemas.Machine)
	if err != nil {
		return fmt.Errorf("schema: %s", cueerrors.Details(err, nil))
	}
	if err := l.schemaInst.AddSyntax(f); err != nil {
		return fmt.Errorf("schema: %s", cueerrors.Details(err, nil))
	}
	v := l.ctx.BuildInstance(l.schemaInst)
	l.schema = v.LookupPath(cue.ParsePath("#Machine"))
	if err := l.schema.Err(); err != nil {
		return fmt.Errorf("schema: %s", cueerrors.Details(err, nil))
	}
	return nil
}

// build evaluates one machine file, resolving `import "github.com/draforge/draforge/schemas"`
// to the embedded schemas; any other import is an error at its position.
func (l *loader) build(f *ast.File) (cue.Value, error) {
	inst := l.bctx.NewInstance(f.Filename, func(pos token.Pos, path string) *build.Instance {
		if path == SchemaImport {
			return l.schemaInst
		}
		if !strings.Contains(strings.Split(path, "/")[0], ".") {
			return nil // standard library: built in
		}
		bad := l.bctx.NewInstance(path, nil)
		bad.Err = cueerrors.Newf(pos, "machine files may import only %q", SchemaImport)
		return bad
	})
	for spec := range f.ImportSpecs() {
		// The standard library (no domain in the path) is built in.
		if path, _ := strconv.Unquote(spec.Path.Value); path != SchemaImport && strings.Contains(strings.Split(path, "/")[0], ".") {
			return cue.Value{}, cueerrors.Newf(spec.Path.Pos(), "import %s: machine files may import only %q", spec.Path.Value, SchemaImport)
		}
	}
	unbind(f)
	if err := inst.AddSyntax(f); err != nil {
		return cue.Value{}, err
	}
	v := l.ctx.BuildInstance(inst)
	return v, v.Err()
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

// cueErrors records CUE errors of a file that has no machine to attribute them to; an error
// inside machine.<name> is still labelled with the machine and the path in it.
func (l *loader) cueErrors(file string, err error) {
	for _, e := range cueerrors.Errors(err) {
		pos := token.NoPos
		if ps := cueerrors.Positions(e); len(ps) > 0 && ps[0].Filename() == file {
			pos = ps[0]
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if p := e.Path(); len(p) >= 2 && p[0] == "machine" {
			prefix := "machine " + strings.Trim(p[1], `"`) + ": "
			if len(p) > 2 {
				prefix += strings.Join(p[2:], ".") + ": "
			}
			msg = prefix + msg
		}
		l.errorf(file, pos, "%s", msg)
	}
}

// unbind turns the file's `machine: [string]: schemas.#Machine` into a hidden field. The loader
// unifies every machine with #Machine itself, one by one, so each error is reported once, with
// the machine's name and the position in the file, instead of failing the whole file at its
// first error. The hidden field keeps the import used.
func unbind(f *ast.File) {
	for i, d := range f.Decls {
		fd, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		if id, ok := fd.Label.(*ast.Ident); !ok || id.Name != "machine" {
			continue
		}
		st, ok := fd.Value.(*ast.StructLit)
		if !ok || len(st.Elts) != 1 {
			continue
		}
		inner, ok := st.Elts[0].(*ast.Field)
		if !ok {
			continue
		}
		if _, pattern := inner.Label.(*ast.ListLit); !pattern {
			continue
		}
		f.Decls[i] = &ast.Field{Label: ast.NewIdent("_machineSchema"), Value: inner.Value}
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
	v, err := l.build(f)
	if err != nil && v.IncompleteKind() != cue.StructKind {
		l.cueErrors(display, err)
		return nil
	}
	// Errors inside machines (the file binds #Machine) are reported per machine below, with
	// their paths; only a file that is not a struct at all stops here.
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
		ms, err := it.Value().Fields()
		if err != nil {
			l.errorf(display, it.Value().Pos(), "machine must be a struct of machines by name")
			found = true // reported
			continue
		}
		for ms.Next() {
			found = true
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

// spec is the CUE shape of a machine as JSON; decode.go turns it into a Machine.
type spec struct {
	Resource   schema.GroupVersionResource
	Namespaced bool
	Optional   bool
	Selector   *struct {
		Labels  map[string]string
		Fields  string
		Without []string
		When    *specTest
	}
	Status   StatusPolicy
	Triggers []specTrigger
	Related  map[string]struct {
		Resource        schema.GroupVersionResource
		Namespace, Name string
	}
	States map[string]struct {
		Conditions   []specCondition
		Terminal     bool
		RequeueAfter string
		On           []specTransition
	}
	Initial string
	Derive  []struct {
		State string
		When  specTest
	}
	AnyState      []specTransition
	Outcomes      map[string]struct{ To string }
	TerminalState string
	Backoff       struct {
		Base, Cap       string
		MaxRetries      int
		Retry, Terminal []ErrorClass
	}
	Workers      int
	HistoryLimit int
	Events       struct{ Transitions *bool }
}

type specTrigger struct {
	Resource                       schema.GroupVersionResource
	Map, NameLabel, NamespaceLabel string
	Name                           string
	On                             []string
	Fields                         []string
}

type specCondition struct {
	Type, Status, Reason, Message string
	When                          *specTest
}

type specTest struct {
	Observe    string
	Deleting   bool
	Field      string
	Label      string
	Annotation string
	Equals     json.RawMessage
	In         []any
	AtLeast    *float64
	Condition  *ConditionTest
	Age        *struct{ Field, Over string }
	Exists     string
	All, Any   *[]specTest
	Of         string
	Not        bool
}

type specTransition struct {
	Event   string
	When    *specTest
	After   *struct{ Duration, Since, Jitter, Annotation string }
	To      string
	Actions []json.RawMessage
}

// machine validates and decodes one machine. raw is the machine as written, so positions
// found in it point into the machine's own file (values from schema defaults are skipped).
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
	b, err := v.MarshalJSON()
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		c.errorf(nil, "%v", err)
		return nil
	}
	m := c.decode(name, &s)
	// Decoding a map loses field order; the CUE structs keep it.
	m.StateOrder = fieldNames(v.LookupPath(cue.ParsePath("states")))
	m.RelatedOrder = fieldNames(v.LookupPath(cue.ParsePath("related")))
	c.check(m)
	c.checkReads(m)
	if len(l.errs) > start {
		return nil
	}
	return m
}

func fieldNames(v cue.Value) []string {
	var out []string
	it, err := v.Fields()
	if err != nil {
		return nil
	}
	for it.Next() {
		out = append(out, it.Selector().Unquoted())
	}
	return out
}
