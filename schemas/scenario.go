package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
	"cuelang.org/go/encoding/yaml"
)

// Schema compiles the embedded schemas package (every *.cue file in FS) in ctx.
func Schema(ctx *cue.Context) (cue.Value, error) {
	inst := build.NewContext().NewInstance("schemas", nil)
	names, err := fs.Glob(FS, "*.cue")
	if err != nil {
		return cue.Value{}, err
	}
	for _, name := range names {
		src, err := fs.ReadFile(FS, name)
		if err != nil {
			return cue.Value{}, err
		}
		if err := inst.AddFile("schemas/"+name, src); err != nil {
			return cue.Value{}, err
		}
	}
	v := ctx.BuildInstance(inst)
	return v, v.Err()
}

// ValidateScenario checks every document of a multi-document YAML scenario against #Document,
// the same check as `go tool cue vet -d '#Document' ./schemas <file>`, and reports every error
// of each document, not only those CUE reports at once (see documentErrors), a value outside
// an enum as one error (see collapseEnums). It returns nil or a CUE error list; format it with cuelang.org/go/cue/errors.Details to get file:line:col positions
// (filename is used for them).
func ValidateScenario(filename string, src []byte) error { return validate(filename, src, "#Document") }

// ValidateTrace checks a workload trace (drivers/trace) against #WorkloadTrace as
// ValidateScenario checks a scenario.
func ValidateTrace(filename string, src []byte) error {
	return validate(filename, src, "#WorkloadTrace")
}

func validate(filename string, src []byte, def string) error {
	ctx := cuecontext.New()
	schema, err := Schema(ctx)
	if err != nil {
		return fmt.Errorf("schemas: compile: %w", err)
	}
	doc := schema.LookupPath(cue.ParsePath(def))
	if err := doc.Err(); err != nil {
		return fmt.Errorf("schemas: %s: %w", def, err)
	}
	var all cueerrors.Error
	src = LineFeeds(src)
	dec := yaml.NewDecoder(filename, bytes.NewReader(src))
	for n := 0; ; n++ {
		expr, err := dec.Extract()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return yamlSyntaxError(filename, src, err)
		}
		v := ctx.BuildExpr(expr)
		if v.Null() == nil { // an empty document (e.g. a trailing ---)
			continue
		}
		for _, e := range documentErrors(ctx, doc, filename, expr) {
			all = cueerrors.Append(all, cueerrors.Promote(e, fmt.Sprintf("document %d", n)))
		}
	}
	if all == nil {
		return nil
	}
	return all
}

// atData gives an error raised only at a schema rule (a rule across fields, such as "at least
// one of nodeSelector or targetNodes") the position of the YAML value the rule checked: the
// value at the error's path in data, or its closest parent present there.
func atData(filename string, data cue.Value, e cueerrors.Error) cueerrors.Error {
	for _, p := range cueerrors.Positions(e) {
		if p.Filename() == filename {
			return e
		}
	}
	path := dataPath(e.Path())
	named, rest := messagePath(e, path)
	if named != nil {
		path = named
	}
	for i := len(path); i >= 0; i-- {
		var sels []cue.Selector
		for _, s := range path[:i] {
			sel := cue.ParsePath(s).Selectors()
			if len(sel) != 1 {
				sel = []cue.Selector{cue.Str(s)}
			}
			sels = append(sels, sel...)
		}
		if v := data.LookupPath(cue.MakePath(sels...)); v.Exists() && v.Pos().Filename() == filename {
			p := &positioned{err: e, pos: valuePos(v)} // a pointer: cue/errors compares errors, a slice field makes the struct incomparable
			if named != nil && i == len(named) {
				// The field the message names is in the document: report it as that field's.
				p.path, p.msg = named, rest
			}
			return p
		}
	}
	return e
}

// valuePos is where v is written: a scalar's value (as CUE's own errors place it), or the
// field of a struct or list (its first line, not its first element's).
func valuePos(v cue.Value) token.Pos {
	if f, ok := v.Source().(*ast.Field); ok && v.IncompleteKind()&(cue.StructKind|cue.ListKind) == 0 && f.Value.Pos().IsValid() {
		return f.Value.Pos()
	}
	return v.Pos()
}

// messagePath is the field a schema rule's message names before ": " (error("spec.deviceCount:
// ...") raised on spec, or "requestPolicies.x: ..." relative to a device group) when that is
// deeper than the error's own path, and the message after it; nil otherwise. "faults[]"
// stands for the list.
func messagePath(e cueerrors.Error, path []string) (named []string, rest string) {
	format, args := e.Msg()
	prefix, rest, ok := strings.Cut(fmt.Sprintf(format, args...), ": ")
	if !ok {
		return nil, ""
	}
	var segs []string
	absolute := len(path) > 0 && strings.TrimSuffix(strings.Split(prefix, ".")[0], "[]") == path[0]
	for s := range strings.SplitSeq(prefix, ".") {
		name, list := strings.CutSuffix(s, "[]")
		if !fieldNameRE.MatchString(name) {
			return nil, ""
		}
		segs = append(segs, name)
		// "faults[]" is the element of the error's own path, when it is in one.
		if k := len(segs); list && absolute && k < len(path) && slices.Equal(segs, path[:k]) && isIndex(path[k]) {
			segs = append(segs, path[k])
		}
	}
	if !absolute {
		return append(slices.Clone(path), segs...), rest
	}
	if len(segs) > len(path) && slices.Equal(segs[:len(path)], path) {
		return segs, rest
	}
	return nil, ""
}

func isIndex(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

var fieldNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// positioned is a CUE error reported at pos, with its own positions after it; path and msg,
// when set, replace the error's (the field its message named, and the rest of the message).
type positioned struct {
	err  cueerrors.Error
	pos  token.Pos
	path []string
	msg  string
}

func (p positioned) Error() string {
	if p.path == nil {
		return p.err.Error()
	}
	return strings.Join(p.path, ".") + ": " + p.msg
}

func (p positioned) Path() []string {
	if p.path == nil {
		return p.err.Path()
	}
	return p.path
}

func (p positioned) Msg() (string, []any) {
	if p.path == nil {
		return p.err.Msg()
	}
	return "%s", []any{p.msg}
}

func (p positioned) Unwrap() error { return p.err }

func (p positioned) Position() token.Pos { return p.pos }

func (p positioned) InputPositions() []token.Pos {
	return append([]token.Pos{p.pos}, p.err.InputPositions()...)
}
