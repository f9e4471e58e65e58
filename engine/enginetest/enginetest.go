// Package enginetest holds what tests outside the engine need to run engine.Decide without a
// cluster: fixed Facts (the product's machines by name are in machines/machinestest). (The
// engine's own tests, in package engine, cannot import it: it imports engine.)
package enginetest

import (
	"slices"

	"github.com/draforge/draforge/engine"
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
