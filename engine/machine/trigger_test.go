package machine

import "testing"

func TestTriggerFilters(t *testing.T) {
	labels := Trigger{Fields: []Path{mustPath(t, "metadata.labels")}}
	ready := Trigger{On: []string{TriggerUpdate}, Fields: []Path{mustPath(t, "metadata.labels"), mustPath(t, "status.conditions[type=Ready].status")}}
	all := Trigger{}
	comings := Trigger{On: []string{TriggerAdd, TriggerDelete}}

	node := func(labels map[string]any, ready, heartbeat string) map[string]any {
		md := map[string]any{"name": "n1", "resourceVersion": heartbeat}
		if labels != nil {
			md["labels"] = labels
		}
		return map[string]any{"metadata": md, "status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat},
		}}}
	}
	base := node(map[string]any{"pool": "a"}, "True", "1")
	for _, tc := range []struct {
		name               string
		cur                map[string]any
		labels, ready, all bool
	}{
		{"heartbeat only", node(map[string]any{"pool": "a"}, "True", "2"), false, false, true},
		{"label value", node(map[string]any{"pool": "b"}, "True", "2"), true, true, true},
		{"label added", node(map[string]any{"pool": "a", "x": "y"}, "True", "2"), true, true, true},
		{"labels removed", node(nil, "True", "2"), true, true, true},
		{"not ready", node(map[string]any{"pool": "a"}, "Unknown", "2"), false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				what string
				tr   Trigger
				want bool
			}{{"labels", labels, tc.labels}, {"ready", ready, tc.ready}, {"all", all, tc.all}} {
				if got := c.tr.Changed(base, tc.cur); got != c.want {
					t.Errorf("%s trigger: Changed = %v, want %v", c.what, got, c.want)
				}
			}
		})
	}
	for _, c := range []struct {
		tr                  Trigger
		add, update, delete bool
	}{
		{all, true, true, true},
		{labels, true, true, true},
		{ready, false, true, false},
		{comings, true, false, true},
	} {
		if c.tr.FiresOn(TriggerAdd) != c.add || c.tr.FiresOn(TriggerUpdate) != c.update || c.tr.FiresOn(TriggerDelete) != c.delete {
			t.Errorf("%v: FiresOn add/update/delete = %v/%v/%v", c.tr.On, c.tr.FiresOn(TriggerAdd), c.tr.FiresOn(TriggerUpdate), c.tr.FiresOn(TriggerDelete))
		}
	}
}

func mustPath(t *testing.T, s string) Path {
	t.Helper()
	p, err := ParsePath(s, false)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
