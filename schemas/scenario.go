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
	dec := yaml.NewDecoder(filename, bytes.NewReader(src))
	for n := 0; ; n++ {
		expr, err := dec.Extract()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		v := ctx.BuildExpr(expr)
		if v.Null() == nil { // an empty document (e.g. a trailing ---)
			continue
		}
		if err := doc.Unify(v).Validate(cue.Concrete(true)); err != nil {
			all = cueerrors.Append(all, cueerrors.Promote(err, fmt.Sprintf("document %d", n)))
		}
	}
	if all == nil {
		return nil
	}
	return all
}
