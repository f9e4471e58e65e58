package machine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template/parse"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Cache is which of the engine's informers of a resource a machine reads an object from.
type Cache int

const (
	// CacheShared is the resource's shared informer (and its per-name and per-namespace
	// informers): related objects, triggers, and the objects of a machine without a selector.
	CacheShared Cache = iota
	// CacheSelected is the form a machine's selected objects are cached in: a selector
	// informer of its own, or the shared typed informer's full form (engine.Selectable).
	CacheSelected
)

// Pruned tells the loader that one cache of a resource drops fields before caching (see
// engine.Informers.CacheTyped and Selectable): a machine that reads any other field of those
// objects would silently see it missing, so loading it is an error naming the field. The
// engine knows no resource; the drivers that prune declare what they keep.
type Pruned struct {
	Resource schema.GroupVersionResource
	Cache    Cache
	// Keep are the paths the cache keeps, each with everything below it, written as test
	// fields are ("spec.containers.name": lists are transparent; a [key=value] step keeps only
	// the matching elements). A read of an ancestor of a kept path is allowed: it is how
	// templates walk down to the kept fields.
	Keep []string
	// By names the pruner, for messages (e.g. "drivers/clusterview.MachinePod").
	By string
}

// read is one field of an object a machine reads, at the CUE value that reads it.
type read struct {
	// related names the related object read; trigger is 1 + the index of the trigger whose
	// objects are read; neither: the machine's own object.
	related string
	trigger int
	path    []Step
	sels    []any
}

// checkReads reports each read of a field that the cache the machine reads it from prunes.
func (c *checker) checkReads(m *Machine) {
	if len(c.l.pruned) == 0 {
		return
	}
	for _, r := range machineReads(m) {
		res, cache, whose := m.Resource, CacheShared, m.Resource.Resource
		switch {
		case r.trigger > 0:
			res = m.Triggers[r.trigger-1].Resource
			whose = res.Resource + " (trigger)"
		case r.related != "":
			rel, ok := m.Related[r.related]
			if !ok {
				continue // an unknown related name is reported on its own
			}
			res, whose = rel.Resource, "related "+r.related+" ("+rel.Resource.Resource+")"
		case m.HasSelector():
			cache = CacheSelected
		}
		p, ok := c.l.pruned[prunedKey{res, cache}]
		if !ok || keeps(p.keep, r.path) {
			continue
		}
		c.errorf(r.sels, "reads %s of %s, which the cache of %s prunes (%s keeps only %s)",
			pathText(r.path), whose, res.Resource, p.By, strings.Join(p.Keep, ", "))
	}
}

type prunedKey struct {
	res   schema.GroupVersionResource
	cache Cache
}

// compiledPruned is a Pruned with its paths parsed.
type compiledPruned struct {
	Pruned
	keep [][]Step
}

// compilePruned parses every Pruned's paths; a bad path or a cache declared twice is the
// declaring driver's bug.
func compilePruned(ps []Pruned) (map[prunedKey]compiledPruned, error) {
	out := make(map[prunedKey]compiledPruned, len(ps))
	for _, p := range ps {
		key := prunedKey{p.Resource, p.Cache}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("pruned cache of %s declared twice (%s)", p.Resource, p.By)
		}
		c := compiledPruned{Pruned: p}
		for _, k := range p.Keep {
			path, err := ParsePath(k, false)
			if err != nil {
				return nil, fmt.Errorf("pruned cache of %s (%s): %w", p.Resource, p.By, err)
			}
			c.keep = append(c.keep, path.Steps)
		}
		out[key] = c
	}
	return out, nil
}

// keeps reports whether read lies in a kept subtree or leads to one.
func keeps(kept [][]Step, read []Step) bool {
	for _, k := range kept {
		n := min(len(k), len(read))
		match := true
		for i := range n {
			// A kept list element [key=value] does not cover [*], which reads every element.
			if k[i].Key != read[i].Key || (k[i].Select && (!read[i].Select || read[i].Any || k[i].SelKey != read[i].SelKey || k[i].SelVal != read[i].SelVal)) {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func pathText(steps []Step) string {
	var b strings.Builder
	for i, s := range steps {
		switch {
		case strings.ContainsAny(s.Key, `.[]"`):
			b.WriteString(`["` + s.Key + `"]`) // as ParsePath reads it
		case i > 0:
			b.WriteString("." + s.Key)
		default:
			b.WriteString(s.Key)
		}
		switch {
		case s.Any:
			b.WriteString("[*]")
		case s.Select:
			b.WriteString("[" + s.SelKey + "=" + s.SelVal + "]")
		}
	}
	return b.String()
}

func keySteps(keys ...string) []Step {
	out := make([]Step, len(keys))
	for i, k := range keys {
		out[i] = Step{Key: k}
	}
	return out
}

// machineReads lists every field m reads of its object, its related objects and its triggers'
// objects: tests, timers, trigger fields and templates.
func machineReads(m *Machine) []read {
	w := &readWalker{}
	for i, t := range m.Triggers {
		for j, f := range t.Fields {
			w.add(read{trigger: i + 1, path: f.Steps, sels: []any{"triggers", i, "fields", j}})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(m.Related)) {
		rel := m.Related[n]
		w.template(rel.NameT, []any{"related", n, "name"})
		w.template(rel.NamespaceT, []any{"related", n, "namespace"})
	}
	for _, n := range slices.Sorted(maps.Keys(m.States)) {
		st := m.States[n]
		for i, cd := range st.Conditions {
			at := []any{"states", n, "conditions", i}
			w.template(cd.Message, append(slices.Clone(at), "message"))
			if cd.When != nil {
				w.test(*cd.When, "", append(slices.Clone(at), "when"))
			}
		}
		for i, t := range st.On {
			w.transition(t, []any{"states", n, "on", i})
		}
	}
	if m.SelectorWhen != nil {
		w.test(*m.SelectorWhen, "", []any{"selector", "when"})
	}
	for i, d := range m.Derive {
		w.test(d.When, "", []any{"derive", i, "when"})
	}
	for i, t := range m.AnyState {
		w.transition(t, []any{"anyState", i})
	}
	return w.reads
}

type readWalker struct{ reads []read }

func (w *readWalker) add(r read) { w.reads = append(w.reads, r) }

func (w *readWalker) own(related string, sels []any, keys ...string) {
	w.add(read{related: related, path: keySteps(keys...), sels: sels})
}

// test records what t reads of the object, or of the related object of (inherited by
// all/any, as the engine evaluates it).
func (w *readWalker) test(t Test, of string, sels []any) {
	at := func(s string) []any { return append(slices.Clone(sels), s) }
	if t.Of != "" {
		of = t.Of
	}
	switch {
	case t.Deleting:
		w.own(of, at("deleting"), "metadata", "deletionTimestamp")
	case t.Condition != nil:
		w.add(read{related: of, path: []Step{{Key: "status"}, {Key: "conditions", Select: true, SelKey: "type", SelVal: t.Condition.Type}}, sels: at("condition")})
		if t.Condition.Current {
			w.own(of, at("condition"), "metadata", "generation")
		}
	case len(t.Field.Steps) > 0:
		w.add(read{related: of, path: t.Field.Steps, sels: at("field")})
	case t.Label != "":
		w.own(of, at("label"), "metadata", "labels", t.Label)
	case t.Annotation != "":
		w.own(of, at("annotation"), "metadata", "annotations", t.Annotation)
	case t.Age:
		w.add(read{related: of, path: t.AgeField.Steps, sels: append(at("age"), "field")})
	}
	for i, x := range t.All {
		w.test(x, of, append(at("all"), i))
	}
	for i, x := range t.Any {
		w.test(x, of, append(at("any"), i))
	}
}

func (w *readWalker) transition(t Transition, sels []any) {
	at := func(s ...any) []any { return append(slices.Clone(sels), s...) }
	if t.When != nil {
		w.test(*t.When, "", at("when"))
	}
	if tm := t.After; tm != nil {
		w.add(read{related: tm.Since.Related, path: tm.Since.Steps, sels: at("after", "since")})
		if tm.Annotation != "" {
			w.own("", at("after", "annotation"), "metadata", "annotations", tm.Annotation)
		}
	}
	for i, a := range t.Actions {
		as := func(s ...any) []any { return at(append([]any{"actions", i}, s...)...) }
		switch {
		case a.Patch != nil:
			w.template(a.Patch.Status, as("patch", "status"))
			w.template(a.Patch.Metadata, as("patch", "metadata"))
		case a.Apply != nil:
			w.template(a.Apply.Namespace, as("apply", "namespace"))
			w.template(a.Apply.Name, as("apply", "name"))
			w.template(a.Apply.Object, as("apply", "object"))
			w.template(a.Apply.Patch, as("apply", "patch"))
		case a.Event != nil:
			w.template(a.Event.Message, as("event", "message"))
		}
	}
}

// template records what the string leaves of t read of .object and .related.<name>.
func (w *readWalker) template(t *Template, sels []any) {
	switch {
	case t == nil:
	case t.isMap:
		for _, k := range t.keys {
			w.template(t.fields[k], append(slices.Clone(sels), k))
		}
	case t.isList:
		for i, e := range t.list {
			w.template(e, append(slices.Clone(sels), i))
		}
	case t.text != nil && t.text.Tree != nil:
		tw := &tmplWalker{w: w, sels: sels}
		tw.list(t.text.Tree.Root, tval{kind: valRoot}, map[string]tval{"$": {kind: valRoot}})
	}
}

// tval is what a template expression stands for, as far as reads go: the template data, its
// .related map, a field of the object or of a related object, or anything else.
type tval struct {
	kind    int
	related string
	path    []Step
}

const (
	valOther = iota
	valRoot
	valRelatedMap
	valObject
)

// field is v's field k.
func (v tval) field(k string) tval {
	switch v.kind {
	case valRoot:
		switch k {
		case "object":
			return tval{kind: valObject}
		case "related":
			return tval{kind: valRelatedMap}
		}
	case valRelatedMap:
		return tval{kind: valObject, related: k}
	case valObject:
		return tval{kind: valObject, related: v.related, path: append(slices.Clip(v.path), Step{Key: k})}
	}
	return tval{}
}

func (v tval) steps(s []Step) tval {
	if v.kind != valObject {
		return tval{}
	}
	return tval{kind: valObject, related: v.related, path: append(slices.Clip(v.path), s...)}
}

// tmplWalker follows a template's parse tree, tracking dot and variables through with, range
// and assignments, and records each object field an expression reaches.
type tmplWalker struct {
	w    *readWalker
	sels []any
}

func (t *tmplWalker) use(v tval) tval {
	if v.kind == valObject {
		t.w.add(read{related: v.related, path: v.path, sels: t.sels})
	}
	return v
}

func (t *tmplWalker) list(l *parse.ListNode, dot tval, vars map[string]tval) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		t.node(n, dot, vars)
	}
}

func (t *tmplWalker) node(n parse.Node, dot tval, vars map[string]tval) {
	switch n := n.(type) {
	case *parse.ActionNode:
		t.pipe(n.Pipe, dot, vars)
	case *parse.IfNode:
		t.pipe(n.Pipe, dot, vars)
		t.list(n.List, dot, maps.Clone(vars))
		t.list(n.ElseList, dot, maps.Clone(vars))
	case *parse.WithNode:
		inner := maps.Clone(vars)
		v := t.pipe(n.Pipe, dot, inner)
		t.list(n.List, v, inner)
		t.list(n.ElseList, dot, maps.Clone(vars))
	case *parse.RangeNode:
		inner := maps.Clone(vars)
		v := t.pipe(n.Pipe, dot, inner)
		// The elements of a list of the object are at the same path (lists are transparent).
		elem := v
		if v.kind != valObject {
			elem = tval{}
		}
		switch len(n.Pipe.Decl) {
		case 1:
			inner[n.Pipe.Decl[0].Ident[0]] = elem
		case 2:
			inner[n.Pipe.Decl[0].Ident[0]] = tval{}
			inner[n.Pipe.Decl[1].Ident[0]] = elem
		}
		t.list(n.List, elem, inner)
		t.list(n.ElseList, dot, maps.Clone(vars))
	case *parse.TemplateNode:
		if n.Pipe != nil {
			t.pipe(n.Pipe, dot, vars)
		}
	}
}

// pipe evaluates a pipeline and binds its declarations to its value (a range then rebinds
// them to its index and element).
func (t *tmplWalker) pipe(p *parse.PipeNode, dot tval, vars map[string]tval) tval {
	var v tval
	for i, c := range p.Cmds {
		var prev *tval
		if i > 0 {
			prev = &v
		}
		v = t.cmd(c, dot, vars, prev)
	}
	for _, d := range p.Decl {
		vars[d.Ident[0]] = v
	}
	return v
}

// cmd evaluates one command; prev is the previous command's value in a pipeline (its last
// argument).
func (t *tmplWalker) cmd(c *parse.CommandNode, dot tval, vars map[string]tval, prev *tval) tval {
	if len(c.Args) == 0 {
		return tval{}
	}
	fn, isFunc := c.Args[0].(*parse.IdentifierNode)
	if !isFunc {
		v := t.arg(c.Args[0], dot, vars)
		for _, a := range c.Args[1:] { // a method's arguments
			t.arg(a, dot, vars)
		}
		return v
	}
	args := make([]tval, 0, len(c.Args))
	for _, a := range c.Args[1:] {
		args = append(args, t.arg(a, dot, vars))
	}
	if prev != nil {
		args = append(args, *prev)
	}
	str := func(i int) (string, bool) {
		if i+1 >= len(c.Args) {
			return "", false
		}
		s, ok := c.Args[i+1].(*parse.StringNode)
		if !ok {
			return "", false
		}
		return s.Text, true
	}
	switch fn.Ident {
	case "field":
		if s, ok := str(1); ok && len(args) > 0 {
			if p, err := ParsePath(s, false); err == nil {
				return t.use(args[0].steps(p.Steps))
			}
		}
	case "label", "annotation":
		if s, ok := str(1); ok && len(args) > 0 {
			return t.use(args[0].steps(keySteps("metadata", fn.Ident+"s", s)))
		}
	case "index":
		if len(args) > 0 {
			v := args[0]
			for i := 1; i < len(args); i++ {
				s, ok := str(i)
				if !ok {
					return tval{}
				}
				v = v.field(s)
			}
			return t.use(v)
		}
	}
	return tval{}
}

// arg evaluates an operand, recording the object field it reaches.
func (t *tmplWalker) arg(n parse.Node, dot tval, vars map[string]tval) tval {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot
	case *parse.FieldNode:
		v := dot
		for _, k := range n.Ident {
			v = v.field(k)
		}
		return t.use(v)
	case *parse.VariableNode:
		v := vars[n.Ident[0]]
		for _, k := range n.Ident[1:] {
			v = v.field(k)
		}
		return t.use(v)
	case *parse.ChainNode:
		v := t.arg(n.Node, dot, vars)
		for _, k := range n.Field {
			v = v.field(k)
		}
		return t.use(v)
	case *parse.PipeNode:
		return t.pipe(n, dot, vars)
	}
	return tval{}
}
