package schemas

import (
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
)

// maxRounds bounds documentErrors' validations of one document.
const maxRounds = 10

// documentErrors returns every error of one YAML document (expr) against #Document, each
// positioned in filename. CUE does not report them all at once: in a list it stops at the
// first element with an error, a field whose value is wrong hides the other errors of its
// struct that read it, and unknown fields are reported only in a struct without other errors.
// So after each validation the fields that were wrong (a scalar with a bad value, an unknown
// field) are removed from the document and it is validated again, keeping the new errors
// that are not consequences of a removal: the removed field now missing, or a rule that reads
// it now incomplete. Struct and list values and list elements are never removed (a rule on
// them stays reported), nor apiVersion or kind: no definition applies to a document whose
// kind is unknown, so it has nothing more to report.
func documentErrors(ctx *cue.Context, doc cue.Value, filename string, expr ast.Expr) []cueerrors.Error {
	var out []cueerrors.Error
	seen := map[string]bool{}
	var removed [][]string
	for round := 0; round < maxRounds; round++ {
		v := ctx.BuildExpr(expr)
		err := doc.Unify(v).Validate(cue.Concrete(true))
		if err == nil {
			break
		}
		var fresh []cueerrors.Error
		var remove [][]string // after the round: its errors are checked against earlier removals
		var unknown []bool
		untyped := false
		for _, e := range dropCascades(collapseEnums(filename, cueerrors.Errors(err))) {
			path := dataPath(e.Path())
			if round > 0 && consequence(e, path, removed) {
				continue
			}
			at := atData(filename, v, e)
			key := errorKey(at)
			if seen[key] {
				continue
			}
			seen[key] = true
			fresh = append(fresh, at)
			if len(path) == 1 && (path[0] == "kind" || path[0] == "apiVersion") {
				untyped = true
			}
			format, _ := e.Msg()
			remove, unknown = append(remove, path), append(unknown, format == "field not allowed")
		}
		out = append(out, fresh...)
		progress := false
		for i, path := range remove {
			if removeField(expr, path, unknown[i]) {
				removed = append(removed, path)
				progress = true
			}
		}
		if untyped || !progress {
			break
		}
	}
	return out
}

// dataPath is an error's path in the document: without the definition (#Document,
// #WorkloadTrace) it is checked against.
func dataPath(p []string) []string {
	if len(p) > 0 && strings.HasPrefix(p[0], "#") {
		return p[1:]
	}
	return p
}

// consequence reports whether an error of a later round follows from a removal: an incomplete
// value (a rule reading a removed field), or an error at or below a removed field.
func consequence(e cueerrors.Error, path []string, removed [][]string) bool {
	format, _ := e.Msg()
	if strings.Contains(format, "incomplete") || strings.Contains(format, "non-concrete") {
		return true
	}
	for _, r := range removed {
		if len(path) >= len(r) && slices.Equal(path[:len(r)], r) {
			return true
		}
	}
	return false
}

func errorKey(e cueerrors.Error) string {
	format, args := e.Msg()
	return fmt.Sprintf("%s|%s|%s", e.Position(), strings.Join(e.Path(), "."), fmt.Sprintf(format, args...))
}

// removeField deletes the field at path from the YAML document's syntax tree when its value is
// a scalar, or when any is (unknown, the field itself is the error). It reports whether it did.
func removeField(expr ast.Expr, path []string, unknown bool) bool {
	if len(path) == 0 || (len(path) == 1 && (path[0] == "kind" || path[0] == "apiVersion")) {
		return false
	}
	node := expr
	for i, seg := range path {
		sels := cue.ParsePath(seg).Selectors()
		if len(sels) != 1 {
			return false
		}
		last := i == len(path)-1
		switch n := node.(type) {
		case *ast.StructLit:
			if sels[0].Type()&cue.StringLabel == 0 {
				return false
			}
			k := slices.IndexFunc(n.Elts, func(d ast.Decl) bool {
				f, ok := d.(*ast.Field)
				if !ok {
					return false
				}
				name, _, err := ast.LabelName(f.Label)
				return err == nil && name == sels[0].Unquoted()
			})
			if k < 0 {
				return false
			}
			f := n.Elts[k].(*ast.Field)
			if !last {
				node = f.Value
				continue
			}
			switch f.Value.(type) {
			case *ast.StructLit, *ast.ListLit:
				if !unknown {
					return false
				}
			}
			n.Elts = slices.Delete(slices.Clone(n.Elts), k, k+1)
			return true
		case *ast.ListLit:
			if last || sels[0].Type()&cue.IndexLabel == 0 || sels[0].Index() >= len(n.Elts) {
				return false // an element is never removed: the indices after it would move
			}
			node = n.Elts[sels[0].Index()]
		default:
			return false
		}
	}
	return false
}

// dropCascades leaves out the errors that only repeat another one: an operation on a value that
// is already an error ("invalid left-hand value to '=~' (type _|_)", "cannot use ... (type
// _|_)") or an interpolation of one. The error itself is reported where it is. When every
// error is such a repeat they are all kept: a rejection always says something.
func dropCascades(errs []cueerrors.Error) []cueerrors.Error {
	cascade := func(e cueerrors.Error) bool {
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		return strings.Contains(msg, "(type _|_)") || msg == "invalid interpolation"
	}
	out := slices.DeleteFunc(slices.Clone(errs), cascade)
	if len(out) == 0 {
		return errs
	}
	return out
}
