package schemas

import (
	"bytes"
	"strconv"
	"strings"

	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// yamlSyntaxError positions a syntax error of the CUE YAML decoder in the file. The decoder
// passes yaml.v3's message on as a plain error, "FILE:LINE: problem", or "FILE: problem" when
// yaml.v3 names no line (a problem on the first one). A plain error has no CUE message or
// position, so cue/errors.Details and scenario.Format printed the file name alone. yaml.v3
// reports no column: the position is the start of the line.
func yamlSyntaxError(filename string, src []byte, err error) error {
	rest, ok := strings.CutPrefix(err.Error(), filename+":")
	if !ok {
		return err
	}
	line := 1
	if n, msg, ok := strings.Cut(rest, ":"); ok {
		if v, convErr := strconv.Atoi(n); convErr == nil && v >= 1 {
			line, rest = v, msg
		}
	}
	f := token.NewFile(filename, -1, len(src))
	f.SetLinesForContent(src)
	return cueerrors.Newf(f.Pos(lineOffset(src, line), token.NoRelPos), "yaml: %s", strings.TrimSpace(rest))
}

// lineOffset is the offset of the start of 1-based line n, or the end of src.
func lineOffset(src []byte, n int) int {
	off := 0
	for ; n > 1; n-- {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			return len(src)
		}
		off += i + 1
	}
	return off
}

// LineFeeds returns src with every lone carriage return replaced by a line feed (same length,
// so every byte offset stays). A lone "\r" ends a line to yaml.v3 but not to the line table of
// the CUE YAML decoder, which indexes that table with yaml.v3's line numbers and panics on such
// a file (cuelang.org/go v0.17.1, internal/encoding/yaml, decoder.yamlOffset; found by
// FuzzSimulatedNodes). Decode YAML with cuelang.org/go/encoding/yaml only after it.
func LineFeeds(src []byte) []byte {
	if !bytes.Contains(src, []byte("\r")) {
		return src
	}
	out := bytes.Clone(src)
	for i, c := range out {
		if c == '\r' && (i+1 == len(out) || out[i+1] != '\n') {
			out[i] = '\n'
		}
	}
	return out
}
