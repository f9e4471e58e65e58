package sdpparity

import (
	"strings"
	"testing"
)

// TestCorpusGoAndCUEAgree runs every corpus document through the CUE schema and the Go
// validator (no cluster): both must give the same verdict, and the expected one. test/e2e's
// TestSDPSchemaParity adds the API server's verdict on the same corpus.
func TestCorpusGoAndCUEAgree(t *testing.T) {
	docs, err := Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 100 {
		t.Fatalf("corpus has %d documents, want at least 100", len(docs))
	}
	schema, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	valid, invalid := 0, 0
	for _, d := range docs {
		cueMsgs, goMsgs := d.CUE(schema), d.Go()
		if m := Mismatch(d, Side{"cue", cueMsgs}, Side{"go", goMsgs}); m != "" {
			t.Error(m)
		}
		if d.Want == Valid {
			valid++
		} else {
			invalid++
		}
	}
	t.Logf("%d documents: %d valid, %d invalid", len(docs), valid, invalid)
}

// TestMismatch: a side that differs from the expectation (or, without one, from the others)
// is reported with every side's messages; a CUE exception binds only the CUE sides.
func TestMismatch(t *testing.T) {
	valid, invalid := []string(nil), []string{"spec.x: bad"}
	d := Doc{Name: "c", File: "f.yaml", Line: 3, Want: Valid}
	if m := Mismatch(d, Side{"api-server", valid}, Side{"cue", valid}, Side{"go", valid}); m != "" {
		t.Errorf("agreement reported: %s", m)
	}
	m := Mismatch(d, Side{"api-server", valid}, Side{"cue", valid}, Side{"go", invalid})
	if !strings.Contains(m, "c (f.yaml:3), expected valid") || !strings.Contains(m, "spec.x: bad") {
		t.Errorf("mismatch report: %q", m)
	}
	if Mismatch(d, Side{"api-server", invalid}, Side{"cue", invalid}, Side{"go", invalid}) == "" {
		t.Error("all sides agreeing against the expectation must be reported")
	}
	d.WantCUE = Invalid
	if m := Mismatch(d, Side{"api-server", valid}, Side{"cue vet", invalid}, Side{"go", valid}); m != "" {
		t.Errorf("documented CUE exception reported: %s", m)
	}
	if Mismatch(d, Side{"api-server", valid}, Side{"cue vet", valid}, Side{"go", valid}) == "" {
		t.Error("CUE no longer matching its documented exception must be reported")
	}
	if Mismatch(Doc{}, Side{"a", valid}, Side{"b", invalid}) == "" {
		t.Error("without an expectation, disagreement must be reported")
	}
}

// TestExceptionCoversTheDocumentedCases: every corpus case whose CUE verdict is a documented
// exception is one Exception recognises (the fuzz target relies on it), and a plain
// disagreement is not.
func TestExceptionCoversTheDocumentedCases(t *testing.T) {
	docs, err := Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range docs {
		if d.WantCUE == "" {
			continue
		}
		n++
		if !Exception(d.Object, d.CUE(schema), d.Go()) {
			t.Errorf("%s (%s:%d): documented exception not recognised", d.Name, d.File, d.Line)
		}
	}
	if n < 10 {
		t.Fatalf("%d documented exceptions, want at least 10", n)
	}
	obj := map[string]any{"spec": map[string]any{"deviceCount": int64(3)}}
	if Exception(obj, []string{"spec.deviceCount: conflicting values"}, nil) {
		t.Error("a CUE-only refusal without a null or integral float is not an exception")
	}
	if Exception(obj, nil, []string{"spec.deviceCount: Invalid value"}) {
		t.Error("a Go-only refusal outside request policies is not an exception")
	}
	obj["spec"].(map[string]any)["deviceCount"] = 3.0
	if !Exception(obj, []string{"spec.deviceCount: conflicting values 3.0 and int"}, nil) {
		t.Error("an integral float is a documented exception")
	}
}
