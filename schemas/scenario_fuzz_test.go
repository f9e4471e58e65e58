package schemas

import (
	"os"
	"path/filepath"
	"testing"

	cueerrors "cuelang.org/go/cue/errors"
)

// FuzzValidateScenario feeds arbitrary YAML to ValidateScenario. Seeds: every example
// scenario and every invalid scenario (plus the committed corpus in testdata/fuzz). It must
// never panic, must give the same verdict twice, and every CUE error must render with Details.
func FuzzValidateScenario(f *testing.F) {
	for _, glob := range []string{"../examples/scenarios/*.yaml", "../test/scenarios/invalid/*.yaml"} {
		files, _ := filepath.Glob(glob)
		if len(files) == 0 {
			f.Fatalf("no seeds in %s", glob)
		}
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		err := ValidateScenario("fuzz.yaml", src)
		again := ValidateScenario("fuzz.yaml", src)
		if (err == nil) != (again == nil) {
			t.Fatalf("verdict changed between two runs: %v / %v", err, again)
		}
		if err != nil && cueerrors.Details(err, nil) == "" {
			t.Fatalf("error without details: %v", err)
		}
	})
}
