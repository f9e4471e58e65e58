package schemas

import (
	"fmt"
	"testing"

	cueerrors "cuelang.org/go/cue/errors"
)

// TestYAMLSyntaxErrorPositioned: a YAML syntax error keeps its message and gets the line
// yaml.v3 names (the first line when it names none), so `scenario vet` prints
// "file:line:col: yaml: ..." instead of the file name alone (found by FuzzSimulatedNodes).
func TestYAMLSyntaxErrorPositioned(t *testing.T) {
	for _, c := range []struct {
		src, msg string
		line     int
	}{
		{`"`, "yaml: found unexpected end of stream", 1},
		{"a: b: c", "yaml: mapping values are not allowed in this context", 1},
		{"kind: Pod\n  bad: 1\n", "yaml: mapping values are not allowed in this context", 2},
		{"a: 1\n---\nb: [\n", "yaml: did not find expected node content", 3},
	} {
		err := ValidateScenario("s.yaml", []byte(c.src))
		errs := cueerrors.Errors(err)
		if len(errs) != 1 {
			t.Fatalf("%q: want one error, got %v", c.src, err)
		}
		format, args := errs[0].Msg()
		pos := errs[0].Position()
		if pos.Filename() != "s.yaml" || pos.Line() != c.line || pos.Column() != 1 {
			t.Errorf("%q: at %s, want s.yaml:%d:1", c.src, pos, c.line)
		}
		if got := fmt.Sprintf(format, args...); got != c.msg {
			t.Errorf("%q: message %q, want %q", c.src, got, c.msg)
		}
	}
}
