package machine

import (
	"fmt"
	"strings"
)

// Path is a parsed field path such as status.conditions[type=Ready].status,
// status.allocation.devices.results[*].bindingConditions or metadata.annotations["a.b/c"].
// Related, when set, reads the related object of that name
// (a timer's since: "related.lease.spec.renewTime").
type Path struct {
	Text    string
	Related string
	Steps   []Step
}

// Step is one path element: a map key, optionally followed by a list element selection:
// [SelKey=SelValue], the first element whose SelKey is SelValue, or [*] (Any), the first
// element where the rest of the path is present, so a presence test holds when any element
// has the field.
type Step struct {
	Key            string
	SelKey, SelVal string
	Select         bool
	Any            bool
}

// ParsePath parses a field path. allowRelated accepts a leading related.<name>.
func ParsePath(s string, allowRelated bool) (Path, error) {
	p := Path{Text: s}
	rest := s
	for rest != "" {
		var st Step
		switch {
		case strings.HasPrefix(rest, `["`):
			end := strings.Index(rest[2:], `"]`)
			if end < 0 {
				return p, fmt.Errorf("path %q: unterminated [\"...\"]", s)
			}
			st.Key, rest = rest[2:2+end], rest[2+end+2:]
		default:
			n := strings.IndexAny(rest, ".[")
			if n < 0 {
				n = len(rest)
			}
			st.Key, rest = rest[:n], rest[n:]
			if strings.ContainsAny(st.Key, `]"`) {
				return p, fmt.Errorf("path %q: unexpected ] or \" in %q (quote keys as [\"...\"])", s, st.Key)
			}
		}
		if st.Key == "" {
			return p, fmt.Errorf("path %q: empty element", s)
		}
		if strings.HasPrefix(rest, "[") && !strings.HasPrefix(rest, `["`) {
			end := strings.Index(rest, "]")
			if end < 0 {
				return p, fmt.Errorf("path %q: unterminated [key=value]", s)
			}
			if rest[1:end] == "*" {
				st.Select, st.Any, rest = true, true, rest[end+1:]
			} else {
				k, v, ok := strings.Cut(rest[1:end], "=")
				if !ok || k == "" || v == "" {
					return p, fmt.Errorf("path %q: list selection must be [key=value] or [*]", s)
				}
				st.Select, st.SelKey, st.SelVal, rest = true, k, v, rest[end+1:]
			}
		}
		p.Steps = append(p.Steps, st)
		switch {
		case rest == "":
		case strings.HasPrefix(rest, "."):
			rest = rest[1:]
			if rest == "" {
				return p, fmt.Errorf("path %q: trailing dot", s)
			}
		case strings.HasPrefix(rest, `["`):
		default:
			return p, fmt.Errorf("path %q: unexpected %q", s, rest[:1])
		}
	}
	if len(p.Steps) == 0 {
		return p, fmt.Errorf("empty path")
	}
	if allowRelated && p.Steps[0].Key == "related" && !p.Steps[0].Select {
		if len(p.Steps) < 3 {
			return p, fmt.Errorf("path %q: want related.<name>.<field>", s)
		}
		p.Related, p.Steps = p.Steps[1].Key, p.Steps[2:]
	}
	return p, nil
}

// Get returns the value at p in obj (a JSON-like map) and whether it is present (non-null).
func (p Path) Get(obj map[string]any) (any, bool) {
	return get(p.Steps, obj)
}

func get(steps []Step, obj any) (any, bool) {
	cur := obj
	for i, st := range steps {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[st.Key]
		if !ok {
			return nil, false
		}
		if !st.Select {
			continue
		}
		list, ok := cur.([]any)
		if !ok {
			return nil, false
		}
		if st.Any {
			for _, e := range list {
				if v, ok := get(steps[i+1:], e); ok {
					return v, true
				}
			}
			return nil, false
		}
		cur = nil
		for _, e := range list {
			if em, ok := e.(map[string]any); ok && fmt.Sprint(em[st.SelKey]) == st.SelVal {
				cur = em
				break
			}
		}
		if cur == nil {
			return nil, false
		}
	}
	return cur, cur != nil
}
