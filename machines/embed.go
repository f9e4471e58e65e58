// Package machines embeds the built-in state machines (CUE package machines). Each file
// declares `machine: <name>: {...}`; engine/machine.Load validates them against
// schemas.#Machine.
package machines

import "embed"

// FS holds every built-in machine file.
//
//go:embed *.cue
var FS embed.FS

// Names are the machines the controller runs, one per embedded file (engine/machine's tests
// keep the two equal). Its drivers and the orphan-slice sweeper exist to serve them, so a
// --machines directory, which replaces the embedded files, must declare each of them: without
// the pool machine, say, the controller would report Ready and never publish a slice.
var Names = []string{"claim", "node", "pod", "pool"}
