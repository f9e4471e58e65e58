package podnamespaces

import (
	"errors"
	"strings"
	"testing"

	"github.com/draforge/draforge/engine"
)

func TestParseAndAllows(t *testing.T) {
	var all Set
	if !all.All() || !all.Allows("anything") || all.Check("anything", "x") != nil {
		t.Errorf("the zero Set must allow every namespace")
	}
	s, err := Parse([]string{"team-b", "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if s.All() || s.String() != "team-a,team-b" {
		t.Errorf("Parse = %q (all=%v)", s.String(), s.All())
	}
	for ns, want := range map[string]bool{"team-a": true, "team-b": true, "team-c": false, "": false, "default": false} {
		if got := s.Allows(ns); got != want {
			t.Errorf("Allows(%q) = %v, want %v", ns, got, want)
		}
	}
}

func TestCheckNamesTheFlag(t *testing.T) {
	s, err := Parse([]string{"team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check("team-a", "create allocation pod"); err != nil {
		t.Errorf("Check of a listed namespace: %v", err)
	}
	err = s.Check("team-c", "create allocation pod draforge-alloc-1")
	var p *engine.PendingError
	if !errors.As(err, &p) {
		t.Fatalf("Check of an unlisted namespace = %v, want a PendingError", err)
	}
	if p.Reason != Reason {
		t.Errorf("reason %q, want %q", p.Reason, Reason)
	}
	for _, w := range []string{"create allocation pod draforge-alloc-1", `namespace "team-c"`, "--pod-namespaces (team-a)", "controller.podNamespaces"} {
		if !strings.Contains(p.Message, w) {
			t.Errorf("message %q lacks %q", p.Message, w)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{[]string{""}, []string{"--pod-namespaces entry 1 is empty"}},
		{[]string{"ok", "Team_A"}, []string{`--pod-namespaces entry 2 "Team_A" is not a namespace name`}},
		{[]string{"a", "b", "a"}, []string{`--pod-namespaces entry 3 "a" is given twice`}},
		{[]string{"", "x.y"}, []string{"entry 1 is empty", `entry 2 "x.y"`}},
	} {
		_, err := Parse(tc.in)
		if err == nil {
			t.Errorf("Parse(%q) accepted", tc.in)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Parse(%q) = %v, want %q", tc.in, err, w)
			}
		}
	}
}
