// Package enginetest holds what tests outside the engine need to run engine.Decide without a
// cluster: fixed Facts and the built-in machines by name. (The engine's own tests, in package
// engine, cannot import it: it imports engine.)
package enginetest

import (
	"slices"
	"testing"

	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/machine"
)

// Facts are fixed engine.Facts: observations by name (one not listed does not hold), their
// errors, and related objects by name (one not listed is absent).
type Facts struct {
	Observations map[string]engine.Fact
	Errors       map[string]error
	Objects      map[string]map[string]any
	// Asked lists the observations asked for, each once, in the order first asked.
	Asked []string
}

// Observe returns the named observation and records that it was asked for.
func (f *Facts) Observe(name string) (engine.Fact, error) {
	if !slices.Contains(f.Asked, name) {
		f.Asked = append(f.Asked, name)
	}
	return f.Observations[name], f.Errors[name]
}

// Related returns the named related object, nil when the case has none.
func (f *Facts) Related(name string) map[string]any { return f.Objects[name] }

// Machine loads the built-in machines (machines/) with the action, observation and mapper
// names known and returns the one called name.
func Machine(tb testing.TB, known machine.Names, name string) *machine.Machine {
	tb.Helper()
	ms, err := machine.Default(known)
	if err != nil {
		tb.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == name {
			return m
		}
	}
	tb.Fatalf("no built-in machine %q", name)
	return nil
}
