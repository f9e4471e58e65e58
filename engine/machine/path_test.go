package machine

import (
	"fmt"
	"testing"
)

func TestParsePathAndGet(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"a.b/c": "x"}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "MemoryPressure", "status": "False"},
			map[string]any{"type": "Ready", "status": "True", "lastHeartbeatTime": "t"},
		}},
		"spec": map[string]any{"n": nil, "results": []any{
			map[string]any{"device": "gpu-0"},
			"not an object",
			map[string]any{"device": "gpu-1", "bindingConditions": []any{"Ready"}},
			map[string]any{"device": "gpu-2", "bindingConditions": []any{"Attached"}},
		}},
	}
	for _, tc := range []struct {
		path  string
		value any
		found bool
	}{
		{"status.conditions[type=Ready].status", "True", true},
		{"status.conditions[type=Ready].lastHeartbeatTime", "t", true},
		{"status.conditions[type=DiskPressure].status", nil, false},
		{`metadata.annotations["a.b/c"]`, "x", true},
		{"metadata.annotations.a", nil, false},
		{"spec.n", nil, false}, // null is absent
		{"spec.n.deeper", nil, false},
		{"status.conditions.type", nil, false}, // a list needs a selection
		// [*]: the first element where the rest is present
		{"spec.results[*].bindingConditions", []any{"Ready"}, true},
		{"spec.results[*].device", "gpu-0", true},
		{"spec.results[*].bindingFailureConditions", nil, false},
		{"status.conditions[*].lastHeartbeatTime", "t", true},
		{"spec.n[*].x", nil, false}, // not a list
	} {
		p, err := ParsePath(tc.path, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		v, ok := p.Get(obj)
		if ok != tc.found || fmt.Sprint(v) != fmt.Sprint(tc.value) {
			t.Errorf("%s = %v, %v; want %v, %v", tc.path, v, ok, tc.value, tc.found)
		}
	}
	p, err := ParsePath("related.lease.spec.renewTime", true)
	if err != nil || p.Related != "lease" || len(p.Steps) != 2 || p.Steps[1].Key != "renewTime" {
		t.Errorf("related path: %+v %v", p, err)
	}
	if p, _ := ParsePath("related.lease.spec", false); p.Related != "" {
		t.Error("related prefix read where it is not allowed")
	}
	for _, bad := range []string{"", "a..b", "a.", "a[b]", "a[=x]", "a[]", "a[**]", `a["b`, "a[b=c", "a]b", "related.x"} {
		if _, err := ParsePath(bad, true); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
