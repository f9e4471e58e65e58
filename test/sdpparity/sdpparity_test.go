package sdpparity

import (
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
