package machine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
)

// Template is a compiled template value: a JSON-like tree whose string leaves may be Go
// text/templates (see #Template in schemas/machine.cue).
type Template struct {
	literal any
	text    *template.Template
	json    bool
	keys    []string
	fields  map[string]*Template
	list    []*Template
	isMap   bool
	isList  bool
}

// Funcs are the functions templates may call; all are pure.
var Funcs = template.FuncMap{
	"field": func(obj any, path string) (any, error) {
		m, ok := obj.(map[string]any)
		if !ok {
			return nil, nil
		}
		p, err := ParsePath(path, false)
		if err != nil {
			return nil, err
		}
		v, _ := p.Get(m)
		return v, nil
	},
	"label":      func(obj any, key string) any { return metaEntry(obj, "labels", key) },
	"annotation": func(obj any, key string) any { return metaEntry(obj, "annotations", key) },
	// toJSON writes a value as JSON, for "json:" templates that build lists (a pod's
	// containerStatuses from its containers). Driver observations hand templates values
	// (.facts.Value), never JSON to parse.
	"toJSON": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}

func metaEntry(obj any, kind, key string) any {
	m, _ := obj.(map[string]any)
	md, _ := m["metadata"].(map[string]any)
	entries, _ := md[kind].(map[string]any)
	if v, ok := entries[key]; ok {
		return v
	}
	return nil
}

// CompileTemplate compiles v, a value decoded from JSON.
func CompileTemplate(v any) (*Template, error) {
	switch v := v.(type) {
	case map[string]any:
		t := &Template{isMap: true, fields: map[string]*Template{}, keys: slices.Sorted(maps.Keys(v))}
		for _, k := range t.keys {
			c, err := CompileTemplate(v[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			t.fields[k] = c
		}
		return t, nil
	case []any:
		t := &Template{isList: true}
		for i, e := range v {
			c, err := CompileTemplate(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			t.list = append(t.list, c)
		}
		return t, nil
	case string:
		return CompileString(v)
	}
	return &Template{literal: v}, nil
}

// CompileString compiles one string template.
func CompileString(s string) (*Template, error) {
	t := &Template{literal: s}
	if rest, ok := strings.CutPrefix(s, "json:"); ok {
		t.json, s = true, rest
	}
	if !t.json && !strings.Contains(s, "{{") {
		return t, nil
	}
	tt, err := template.New("").Funcs(Funcs).Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, fmt.Errorf("template %q: %w", s, err)
	}
	t.text = tt
	return t, nil
}

// IsLiteral reports whether rendering needs no data (no template anywhere).
func (t *Template) IsLiteral() bool {
	switch {
	case t == nil:
		return true
	case t.isMap:
		for _, f := range t.fields {
			if !f.IsLiteral() {
				return false
			}
		}
		return true
	case t.isList:
		for _, e := range t.list {
			if !e.IsLiteral() {
				return false
			}
		}
		return true
	}
	return t.text == nil
}

// IsZero reports whether the template is absent or the empty string.
func (t *Template) IsZero() bool { return t == nil || (t.text == nil && t.literal == "") }

// Render renders the template against data.
func (t *Template) Render(data any) (any, error) {
	switch {
	case t == nil:
		return nil, nil
	case t.isMap:
		out := make(map[string]any, len(t.keys))
		for _, k := range t.keys {
			v, err := t.fields[k].Render(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = v
		}
		return out, nil
	case t.isList:
		out := make([]any, len(t.list))
		for i, e := range t.list {
			v, err := e.Render(data)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = v
		}
		return out, nil
	case t.text == nil:
		return t.literal, nil
	}
	var b strings.Builder
	if err := t.text.Execute(&b, data); err != nil {
		return nil, err
	}
	if !t.json {
		return b.String(), nil
	}
	var v any
	if err := json.Unmarshal([]byte(b.String()), &v); err != nil {
		return nil, fmt.Errorf("json: template rendered %q: %w", b.String(), err)
	}
	return v, nil
}

// RenderString renders a string template; nil renders "".
func (t *Template) RenderString(data any) (string, error) {
	if t == nil {
		return "", nil
	}
	v, err := t.Render(data)
	if err != nil {
		return "", err
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}
