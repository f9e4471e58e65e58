// Package machines holds the product's state machines (CUE package machines) and loads them
// for the engine, which runs whatever machines it is given. Each file declares
// `machine: <name>: {...}` and binds schemas.#Machine.
package machines

import (
	"embed"

	"github.com/draforge/draforge/engine/machine"
)

// FS holds every built-in machine file.
//
//go:embed *.cue
var FS embed.FS

// Names are the machines the controller runs, one per embedded file (this package's tests
// keep the two equal). Its drivers and the orphan-slice sweeper exist to serve them, so a
// --machines directory, which replaces the embedded files, must declare each of them: without
// the pool machine, say, the controller would report Ready and never publish a slice.
var Names = []string{"claim", "computedomain", "gpuclique", "node", "pod", "pool"}

// Load loads and validates the built-in machines against known, the drivers' names (see
// drivers.Names); errors name machines/<file>:line:col.
func Load(known machine.Names) ([]*machine.Machine, error) {
	return machine.LoadFS(FS, "machines", known)
}
