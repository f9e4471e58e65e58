package simdevice

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClique: a node's clique is its label, or while its fabric is detached the kept one; a pool
// selecting nodes by clique still targets a node out of it, so its GPUs stay published.
func TestClique(t *testing.T) {
	const clique = "a1b2c3d4-e5f6-7890-abcd-ef1234567890.0"
	for _, c := range []struct {
		labels, annotations map[string]string
		want                string
		left                bool
	}{
		{map[string]string{CliqueLabel: clique}, nil, clique, false},
		{nil, map[string]string{DetachedCliqueAnnotation: clique}, clique, true},
		{map[string]string{CliqueLabel: "u.1"}, map[string]string{DetachedCliqueAnnotation: clique}, "u.1", false},
		{nil, nil, "", false},
	} {
		if got := Clique(c.labels, c.annotations); got != c.want {
			t.Errorf("Clique(%v, %v) = %q, want %q", c.labels, c.annotations, got, c.want)
		}
		if got, left := LeftClique(c.labels, c.annotations); left != c.left || (left && got != clique) {
			t.Errorf("LeftClique(%v, %v) = %q %v, want left %v", c.labels, c.annotations, got, left, c.left)
		}
	}
	p := newPool(func(s *PoolSpec) { s.TargetNodes, s.NodeSelector = nil, map[string]string{CliqueLabel: clique} })
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"rack": "r0"},
		Annotations: map[string]string{DetachedCliqueAnnotation: clique}}}
	if !p.Targets(out) {
		t.Error("a pool selecting the clique does not target a node out of it")
	}
	if out.Labels[CliqueLabel] != "" {
		t.Error("Targets changed the node's labels")
	}
	out.Annotations[DetachedCliqueAnnotation] = "u.1"
	if p.Targets(out) {
		t.Error("a pool selecting one clique targets a node out of another")
	}
}
