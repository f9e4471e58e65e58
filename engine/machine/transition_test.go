package machine

import "testing"

// TestTransitionChanges: which actions may change the machine's own object, and its status,
// in memory (the engine copies the object and compares statuses only for those).
func TestTransitionChanges(t *testing.T) {
	for _, c := range []struct {
		name           string
		actions        []Action
		object, status bool
	}{
		{"none", nil, false, false},
		{"apply and event", []Action{{Apply: &ApplyAction{}}, {Event: &EventAction{}}}, false, false},
		{"status patch", []Action{{Apply: &ApplyAction{}}, {Patch: &PatchAction{Status: &Template{}}}}, true, true},
		{"metadata patch", []Action{{Patch: &PatchAction{Metadata: &Template{}}}}, true, false},
		{"finalizer", []Action{{Finalizer: &FinalizerAction{Add: "f"}}}, true, false},
		{"delete", []Action{{Delete: true}}, true, false},
		{"driver", []Action{{Driver: "prepareClaims"}}, true, true},
	} {
		tr := Transition{Actions: c.actions}
		if got := tr.ChangesObject(); got != c.object {
			t.Errorf("%s: ChangesObject %v, want %v", c.name, got, c.object)
		}
		if got := tr.MayChangeStatus(); got != c.status {
			t.Errorf("%s: MayChangeStatus %v, want %v", c.name, got, c.status)
		}
	}
}
