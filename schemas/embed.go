// Package schemas embeds the CUE definitions (package schemas) that DRAForge validates its
// inputs against, so the binary and the schema can never drift apart.
package schemas

import "embed"

// FS holds every *.cue file of the schemas package.
//
//go:embed *.cue
var FS embed.FS
