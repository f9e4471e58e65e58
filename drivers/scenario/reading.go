package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	cueyaml "cuelang.org/go/encoding/yaml"

	"github.com/draforge/draforge/schemas"
)

// sameReading checks that the schema saw what the objects hold. The schema reads YAML as CUE
// does (YAML 1.2: `n`, `yes`, `on` are strings); Kubernetes' YAML decoder, which decoded objs,
// reads YAML 1.1 (they are booleans). A value the two read differently passed the schema as
// something it is not: it is an error at its file:line:col, asking for quotes.
func sameReading(filename string, src []byte, objs []Object) error {
	ctx := cuecontext.New()
	dec := cueyaml.NewDecoder(filename, bytes.NewReader(schemas.LineFeeds(src)))
	var docs []cue.Value
	for {
		expr, err := dec.Extract()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err // Vet read the same stream without error
		}
		if v := ctx.BuildExpr(expr); v.Null() != nil {
			docs = append(docs, v)
		}
	}
	if len(docs) != len(objs) {
		return fmt.Errorf("%s: %d documents to the schema, %d to the Kubernetes YAML decoder", filename, len(docs), len(objs))
	}
	var all cueerrors.Error
	for i, v := range docs {
		if err := compare(v, objs[i].Obj.Object, nil); err != nil {
			all = cueerrors.Append(all, err)
		}
	}
	if all == nil {
		return nil
	}
	return all
}

// compare returns an error at the first value of v that got differs from, or nil.
func compare(v cue.Value, got any, path []string) cueerrors.Error {
	switch g := got.(type) {
	case map[string]any:
		it, err := v.Fields()
		if err != nil || v.Kind() != cue.StructKind {
			return differs(v, got, path)
		}
		n := 0
		for it.Next() {
			n++
			x, ok := g[it.Selector().Unquoted()]
			if !ok {
				return differs(it.Value(), nil, append(path, it.Selector().Unquoted()))
			}
			if err := compare(it.Value(), x, append(path, it.Selector().Unquoted())); err != nil {
				return err
			}
		}
		if n != len(g) {
			return differs(v, got, path)
		}
		return nil
	case []any:
		if v.Kind() != cue.ListKind {
			return differs(v, got, path)
		}
		it, _ := v.List()
		i := 0
		for ; it.Next(); i++ {
			if i >= len(g) {
				return differs(v, got, path)
			}
			if err := compare(it.Value(), g[i], append(path, fmt.Sprint(i))); err != nil {
				return err
			}
		}
		if i != len(g) {
			return differs(v, got, path)
		}
		return nil
	}
	var want any
	if err := v.Decode(&want); err != nil || !sameScalar(want, got) {
		return differs(v, got, path)
	}
	return nil
}

// sameScalar compares two decoded scalars, numbers by value (3, 3.0 and int64(3) agree).
func sameScalar(a, b any) bool {
	norm := func(x any) any {
		raw, err := json.Marshal(x)
		if err != nil {
			return x
		}
		var out any
		_ = json.Unmarshal(raw, &out)
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func differs(v cue.Value, got any, path []string) cueerrors.Error {
	src := "?"
	if s, err := v.String(); err == nil {
		src = fmt.Sprintf("%q", s)
	} else if b, err := v.MarshalJSON(); err == nil {
		src = string(b)
	}
	g, _ := json.Marshal(got)
	return cueerrors.Newf(v.Pos(), "%s: the schema reads %s, Kubernetes YAML (1.1) reads %s: quote the value (y, n, yes, no, on, off are booleans to Kubernetes)",
		pathString(path), src, g)
}

func pathString(p []string) string {
	if len(p) == 0 {
		return "document"
	}
	var b bytes.Buffer
	for i, s := range p {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}
