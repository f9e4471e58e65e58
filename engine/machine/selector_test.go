package machine

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// TestLabelSelector: a machine selects objects with every Selector label and none of the
// SelectorWithout keys (whatever their value); the same selector is sent to the server.
func TestLabelSelector(t *testing.T) {
	m := &Machine{Selector: map[string]string{"sim": "true"}, SelectorWithout: []string{"example.com/skip"}}
	if !m.HasSelector() || (&Machine{}).HasSelector() || !(&Machine{SelectorWithout: []string{"k"}}).HasSelector() {
		t.Error("HasSelector")
	}
	sel := m.LabelSelector()
	if got := sel.String(); got != "!example.com/skip,sim=true" {
		t.Errorf("selector %q", got)
	}
	for _, tc := range []struct {
		labels labels.Set
		want   bool
	}{
		{labels.Set{"sim": "true"}, true},
		{labels.Set{"sim": "true", "example.com/skip": ""}, false},
		{labels.Set{"sim": "true", "example.com/skip": "uid"}, false},
		{labels.Set{"sim": "false"}, false},
		{nil, false},
	} {
		if got := sel.Matches(tc.labels); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.labels, got, tc.want)
		}
	}
	if got := (&Machine{}).LabelSelector(); !got.Empty() {
		t.Errorf("no selector: %q", got)
	}
}
