// Package machinegraph renders loaded state machines (engine/machine) as Mermaid
// stateDiagram-v2: every state, the initial state, transitions labelled "event / actions"
// (with their timer), blocked outcomes, terminal states marked and linked to the end state.
package machinegraph

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/draforge/draforge/engine/machine"
)

var nonID = regexp.MustCompile(`[^A-Za-z0-9_]`)

func id(state string) string { return nonID.ReplaceAllString(state, "_") }

// Mermaid writes one machine as a Mermaid stateDiagram-v2. Output order follows the machine's
// declaration order (states, then each state's transitions: anyState first), so it is
// deterministic.
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
	for _, from := range m.StateOrder {
		for _, t := range m.TransitionsOf(from) {
			label := t.Event
			if t.After != nil {
				label += fmt.Sprintf(" after %s", t.After)
			}
			if len(t.Actions) > 0 {
				label += " / " + strings.Join(t.ActionNames(), ", ")
			}
			fmt.Fprintf(&b, "  %s --> %s : %s\n", id(from), id(t.To), label)
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(m.Outcomes)) {
		fmt.Fprintf(&b, "  note right of %s : entered when an action reports blocked %s\n", id(m.Outcomes[reason]), reason)
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
