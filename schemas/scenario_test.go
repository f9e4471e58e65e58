package schemas

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	cueerrors "cuelang.org/go/cue/errors"
)

func TestExampleScenariosAreValid(t *testing.T) {
	files, _ := filepath.Glob("../examples/scenarios/*.yaml")
	if len(files) < 9 {
		t.Fatalf("expected at least 9 example scenarios, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(src), "# ") {
				t.Errorf("scenario must start with a comment block describing it")
			}
			if err := ValidateScenario(f, src); err != nil {
				t.Fatalf("want valid, got:\n%s", cueerrors.Details(err, nil))
			}
		})
	}
}

func TestSimulatedNodesExampleIsValid(t *testing.T) {
	f := "../examples/simulated-nodes.yaml"
	src, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateScenario(f, src); err != nil {
		t.Fatalf("want valid, got:\n%s", cueerrors.Details(err, nil))
	}
}

var expectRE = regexp.MustCompile(`(?m)^# expect: (.+)$`)

var atRE = regexp.MustCompile(`(?m)^# at: line (\d+)`)

func TestInvalidScenariosFailWithPositions(t *testing.T) {
	files, _ := filepath.Glob("../test/scenarios/invalid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no invalid scenarios found")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m := expectRE.FindSubmatch(src)
			if m == nil {
				t.Fatal("missing '# expect: <substring>' line")
			}
			err = ValidateScenario(f, src)
			if err == nil {
				t.Fatal("want an error, got none")
			}
			details := cueerrors.Details(err, nil)
			if want := strings.TrimSpace(string(m[1])); !strings.Contains(details, want) {
				t.Errorf("error does not contain %q:\n%s", want, details)
			}
			// Positioned at the YAML field; a rule across fields at the value it checked, whose
			// line the file gives as "# at: line N".
			pos := regexp.QuoteMeta(filepath.Base(f)) + `:\d+:\d+`
			if at := atRE.FindSubmatch(src); at != nil {
				pos = regexp.QuoteMeta(filepath.Base(f)) + ":" + string(at[1]) + `:\d+`
			}
			if !regexp.MustCompile(pos).MatchString(details) {
				t.Errorf("error has no position matching %s:\n%s", pos, details)
			}
		})
	}
}
