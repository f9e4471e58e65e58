// Package machines embeds the built-in state machines (CUE package machines). Each file
// declares `machine: <name>: {...}`; engine/machine.Load validates them against
// schemas.#Machine.
package machines

import "embed"

// FS holds every built-in machine file.
//
//go:embed *.cue
var FS embed.FS
