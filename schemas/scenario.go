package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"cuelang.org/go/cue"
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
// the same check as `go tool cue vet -d '#Document' ./schemas <file>`. It returns nil or a CUE
// error list; format it with cuelang.org/go/cue/errors.Details to get file:line:col positions
// (filename is used for them).
func ValidateScenario(filename string, src []byte) error {
	ctx := cuecontext.New()
	schema, err := Schema(ctx)
	if err != nil {
		return fmt.Errorf("schemas: compile: %w", err)
	}
	doc := schema.LookupPath(cue.ParsePath("#Document"))
	if err := doc.Err(); err != nil {
		return fmt.Errorf("schemas: #Document: %w", err)
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
		if err := doc.Unify(v).Validate(cue.Concrete(true)); err != nil {
			for _, e := range cueerrors.Errors(err) {
				all = cueerrors.Append(all, cueerrors.Promote(atData(filename, v, e), fmt.Sprintf("document %d", n)))
			}
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
	path := e.Path()
	if len(path) > 0 && path[0] == "#Document" {
		path = path[1:]
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
			return positioned{err: e, pos: v.Pos()}
		}
	}
	return e
}

// positioned is a CUE error reported at pos, with its own positions after it.
type positioned struct {
	err cueerrors.Error
	pos token.Pos
}

func (p positioned) Error() string        { return p.err.Error() }
func (p positioned) Path() []string       { return p.err.Path() }
func (p positioned) Msg() (string, []any) { return p.err.Msg() }
func (p positioned) Unwrap() error        { return p.err }

func (p positioned) Position() token.Pos { return p.pos }

func (p positioned) InputPositions() []token.Pos {
	return append([]token.Pos{p.pos}, p.err.InputPositions()...)
}
