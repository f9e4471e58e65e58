package schemas

import (
	"fmt"
	"slices"
	"strings"

	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// CUE reports a value that matches no alternative of a disjunction as one "conflicting values
// <alternative> and <value>" error per alternative plus "<n> errors in empty disjunction". For a
// disjunction of string literals (an enum: a profile, a fault mode, a kind) that is a dump of the
// schema; collapseEnums turns it into one error naming the valid values and the closest one.
const (
	conflictMsg   = "conflicting values %s and %s"
	mismatchedMsg = "conflicting values %s and %s (mismatched types %s and %s)"
	emptyDisjMsg  = "%d errors in empty disjunction:"
)

// collapseEnums replaces, per path, the errors of an enum the value did not match (every
// alternative a string literal, one conflict error each, as many as the empty-disjunction
// error counts) by one enumError at the value's position in filename. Other errors are kept as
// they are, in order.
func collapseEnums(filename string, errs []cueerrors.Error) []cueerrors.Error {
	type group struct {
		summary   int // index of the empty-disjunction error, -1 if none
		alts      int // its count of alternatives
		conflicts []int
	}
	groups := map[string]*group{}
	var order []string
	for i, e := range errs {
		key := strings.Join(e.Path(), "\x00")
		g := groups[key]
		if g == nil {
			g = &group{summary: -1}
			groups[key] = g
			order = append(order, key)
		}
		switch format, args := e.Msg(); format {
		case emptyDisjMsg:
			if n, ok := args[0].(int); ok && len(args) == 1 {
				g.summary, g.alts = i, n
			}
		case conflictMsg, mismatchedMsg:
			g.conflicts = append(g.conflicts, i)
		}
	}
	replaced := map[int]cueerrors.Error{} // at the summary's index
	drop := map[int]bool{}
	for _, key := range order {
		g := groups[key]
		if g.summary < 0 || g.alts < 2 || len(g.conflicts) != g.alts {
			continue
		}
		got, alts, ok := enumConflicts(errs, g.conflicts)
		if !ok {
			continue
		}
		e := &enumError{path: errs[g.summary].Path(), got: got, valid: alts}
		for _, p := range cueerrors.Positions(errs[g.conflicts[0]]) {
			if p.Filename() == filename {
				e.pos = p
				break
			}
		}
		replaced[g.summary] = e
		for _, i := range g.conflicts {
			drop[i] = true
		}
	}
	if len(replaced) == 0 {
		return errs
	}
	// With an unknown apiVersion or kind no definition applies, so every other field of the
	// document is "not allowed": only the unknown value is news.
	untyped := false
	for _, e := range replaced {
		p := e.Path()
		untyped = untyped || (len(p) == 2 && p[0] == "#Document" && (p[1] == "kind" || p[1] == "apiVersion"))
	}
	out := make([]cueerrors.Error, 0, len(errs))
	for i, e := range errs {
		format, _ := e.Msg()
		switch {
		case replaced[i] != nil:
			out = append(out, replaced[i])
		case drop[i], untyped && format == "field not allowed":
		default:
			out = append(out, e)
		}
	}
	return out
}

// enumConflicts returns the value every conflict error shares and the other sides, when each of
// those is a string literal (in the schema's order, without repeats).
func enumConflicts(errs []cueerrors.Error, idx []int) (got string, alts []string, ok bool) {
	pairs := make([][2]string, len(idx))
	for k, i := range idx {
		_, args := errs[i].Msg()
		if len(args) < 2 {
			return "", nil, false
		}
		pairs[k] = [2]string{fmt.Sprint(args[0]), fmt.Sprint(args[1])}
	}
	// The value is the side common to all (CUE puts it second; do not rely on it).
	for _, cand := range pairs[0] {
		common := true
		for _, p := range pairs[1:] {
			common = common && (p[0] == cand || p[1] == cand)
		}
		if !common {
			continue
		}
		alts = alts[:0]
		for _, p := range pairs {
			other := p[0]
			if other == cand {
				other = p[1]
			}
			s, isString := stringLiteral(other)
			if !isString {
				return "", nil, false
			}
			if !slices.Contains(alts, s) {
				alts = append(alts, s)
			}
		}
		return cand, alts, true
	}
	return "", nil, false
}

// stringLiteral unquotes a CUE double-quoted string literal as CUE formats it.
func stringLiteral(s string) (string, bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", false
	}
	u, err := literal.Unquote(s)
	return u, err == nil
}

// enumError is a value outside an enum: `unknown profile "nvidia-h999" (valid: amd-gpu, ...;
// closest: nvidia-gpu)`.
type enumError struct {
	path  []string
	pos   token.Pos
	got   string // as CUE formats it: a quoted string, or a number, bool...
	valid []string
}

// field is the name the message uses: the last path element that is not a list index.
func (e *enumError) field() string {
	for _, p := range slices.Backward(e.path) {
		if p != "" && strings.Trim(p, "0123456789") != "" {
			return p
		}
	}
	return "value"
}

func (e *enumError) Msg() (string, []any) {
	s := fmt.Sprintf("unknown %s %s (valid: %s", e.field(), e.got, strings.Join(e.valid, ", "))
	if got, ok := stringLiteral(e.got); ok {
		if c := closest(got, e.valid); c != "" {
			s += "; closest: " + c
		}
	}
	return s + ")", nil
}

func (e *enumError) Error() string {
	msg, _ := e.Msg()
	if len(e.path) == 0 {
		return msg
	}
	return strings.Join(e.path, ".") + ": " + msg
}

func (e *enumError) Path() []string              { return e.path }
func (e *enumError) Position() token.Pos         { return e.pos }
func (e *enumError) InputPositions() []token.Pos { return nil }

// closest is the candidate at the smallest edit distance from s, ignoring case (the first of
// equals), among those within half the length of s or containing s ("amd" → "amd-gpu"); ""
// when none is: a suggestion that shares little with s only misleads.
func closest(s string, candidates []string) string {
	best, bestD := "", -1
	ls := strings.ToLower(s)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := editDistance(ls, lc)
		near := d <= len([]rune(s))/2 || (s != "" && strings.Contains(lc, ls))
		if near && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
