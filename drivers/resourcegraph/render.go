package resourcegraph

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

var dotShape = map[string]string{
	KindSDP: "folder", KindResourcePool: "box3d", KindNode: "box", KindDevice: "ellipse",
	KindDeviceClass: "note", KindResourceClaim: "hexagon", KindPod: "component",
}

func label(n Node) string {
	name := n.Name
	if n.Namespace != "" {
		name = n.Namespace + "/" + n.Name
	}
	l := n.Kind + "\n" + name
	if n.Missing {
		l += "\n(missing)"
	}
	return l
}

// DOT writes the graph in Graphviz DOT.
func (g *Graph) DOT(w io.Writer) error {
	var b strings.Builder
	b.WriteString("digraph draforge {\n  rankdir=LR;\n  node [fontname=\"Helvetica\"];\n")
	for _, n := range g.Nodes {
		attrs := fmt.Sprintf("label=%s, shape=%s", strconv.Quote(label(n)), dotShape[n.Kind])
		if n.Missing {
			attrs += ", style=dashed, color=red"
		}
		fmt.Fprintf(&b, "  %s [%s];\n", strconv.Quote(n.ID), attrs)
	}
	for _, e := range g.Edges {
		fmt.Fprintf(&b, "  %s -> %s [label=%s];\n", strconv.Quote(e.From), strconv.Quote(e.To), strconv.Quote(e.Kind))
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// mermaidText escapes a label for a Mermaid quoted string.
func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "\n", "<br/>", "<", "#lt;", ">", "#gt;")
	return r.Replace(s)
}

// Mermaid writes the graph as a Mermaid flowchart. Node IDs are n0, n1, … in ID order, since
// Mermaid IDs cannot hold '/' or ':'.
func (g *Graph) Mermaid(w io.Writer) error {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	ids := map[string]string{}
	for i, n := range g.Nodes {
		ids[n.ID] = "n" + strconv.Itoa(i)
		open, close := "[", "]"
		switch n.Kind {
		case KindResourceClaim:
			open, close = "{{", "}}"
		case KindDevice:
			open, close = "([", "])"
		case KindDeviceClass:
			open, close = "[/", "/]"
		case KindPod:
			open, close = "[[", "]]"
		}
		fmt.Fprintf(&b, "  %s%s\"%s\"%s\n", ids[n.ID], open, mermaidText(label(n)), close)
	}
	for _, e := range g.Edges {
		fmt.Fprintf(&b, "  %s -->|%s| %s\n", ids[e.From], e.Kind, ids[e.To])
	}
	kinds := map[string][]string{}
	missing := []string{}
	for _, n := range g.Nodes {
		kinds[n.Kind] = append(kinds[n.Kind], ids[n.ID])
		if n.Missing {
			missing = append(missing, ids[n.ID])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		fmt.Fprintf(&b, "  class %s %s\n", strings.Join(kinds[k], ","), k)
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "  class %s missing\n  classDef missing stroke:#d33,stroke-dasharray:4\n", strings.Join(missing, ","))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
