package cli

import "testing"

func TestExplainTarget(t *testing.T) {
	for arg, want := range map[string][2]string{
		"waiting":                {"claim", "waiting"},
		"claim/waiting":          {"claim", "waiting"},
		"resourceclaims/waiting": {"claim", "waiting"},
		"pod/trainer":            {"pod", "trainer"},
		"Pods/trainer":           {"pod", "trainer"},
		"po/trainer":             {"pod", "trainer"},
		"job/train":              {"job", "train"},
		"jobs.batch/train":       {"job", "train"},
	} {
		kind, name, err := explainTarget(arg)
		if err != nil || kind != want[0] || name != want[1] {
			t.Errorf("explainTarget(%q) = %q, %q, %v; want %v", arg, kind, name, err, want)
		}
	}
	for arg, msg := range map[string]string{
		"node/a":  `explain "node/a": unknown kind "node" (want claim, pod or job)`,
		"pod/":    `explain "pod/": want [claim/]NAME, pod/NAME or job/NAME`,
		"pod/a/b": `explain "pod/a/b": want [claim/]NAME, pod/NAME or job/NAME`,
	} {
		if _, _, err := explainTarget(arg); err == nil || err.Error() != msg {
			t.Errorf("explainTarget(%q) error = %v, want %q", arg, err, msg)
		}
	}
}
