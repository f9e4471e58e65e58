// Package machinegraph renders loaded state machines (engine/machine) as Mermaid
// stateDiagram-v2: every state, the initial state, transitions labelled "event / actions",
// terminal states marked and linked to the end state.
package machinegraph

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/draforge/draforge/engine/machine"
)

var nonID = regexp.MustCompile(`[^A-Za-z0-9_]`)

func id(state string) string { return nonID.ReplaceAllString(state, "_") }

// Mermaid writes one machine as a Mermaid stateDiagram-v2. Output order follows the machine's
// declaration order (states, then transitions), so it is deterministic.
func Mermaid(w io.Writer, m *machine.Machine) error {
	var b strings.Builder
	gvr := m.Resource.Resource
	if m.Resource.Group != "" {
		gvr += "." + m.Resource.Group
	}
	fmt.Fprintf(&b, "---\ntitle: machine %s (%s/%s)\n---\nstateDiagram-v2\n", m.Name, gvr, m.Resource.Version)
	for _, name := range m.StateOrder {
		fmt.Fprintf(&b, "  state %q as %s\n", name, id(name))
	}
	fmt.Fprintf(&b, "  [*] --> %s\n", id(m.Initial))
	for _, t := range m.Transitions {
		from := t.From
		if len(from) == 1 && from[0] == "*" {
			from = nil
			for _, name := range m.StateOrder {
				if !m.States[name].Terminal {
					from = append(from, name)
				}
			}
		}
		label := t.Event
		if len(t.Actions) > 0 {
			label += " / " + strings.Join(t.Actions, ", ")
		}
		for _, f := range from {
			fmt.Fprintf(&b, "  %s --> %s : %s\n", id(f), id(t.To), label)
		}
	}
	for _, name := range m.StateOrder {
		st := m.States[name]
		if st.Terminal {
			fmt.Fprintf(&b, "  %s --> [*]\n", id(name))
			fmt.Fprintf(&b, "  class %s terminal\n", id(name))
		}
	}
	if m.TerminalState != "" {
		fmt.Fprintf(&b, "  note left of %s : entered on terminal errors or exhausted retries\n", id(m.TerminalState))
	}
	b.WriteString("  classDef terminal fill:#fdd,stroke:#c33,stroke-width:2px\n")
	_, err := io.WriteString(w, b.String())
	return err
}
