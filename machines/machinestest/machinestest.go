// Package machinestest gives tests the product's built-in machines by name, loaded as the
// controller loads them (machines.Load), without a cluster.
package machinestest

import (
	"testing"

	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/machines"
)

// Machine loads the built-in machines with the action, observation and mapper names known and
// returns the one called name.
func Machine(tb testing.TB, known machine.Names, name string) *machine.Machine {
	tb.Helper()
	ms, err := machines.Load(known)
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
