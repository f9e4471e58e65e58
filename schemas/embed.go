// Package schemas embeds the CUE definitions (package schemas) that DRAForge validates its
// inputs against, so the binary and the schema can never drift apart.
package schemas

import "embed"

// FS holds every *.cue file of the schemas package.
//
//go:embed *.cue
var FS embed.FS

// MachineFile is the file of FS that defines the machine DSL (#Machine and what it uses): the
// one schema the engine's machine loader compiles. It must stand alone, without the scenario
// or pool schemas beside it, so the engine knows no product schema.
const MachineFile = "machine.cue"

// Machine is MachineFile's source.
//
//go:embed machine.cue
var Machine []byte
