package engine

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestInternObjectSharesKeysAndValues: two decoded objects share their keys and repeated values
// after interning, keep their own identity strings, and read the same as before.
func TestInternObjectSharesKeysAndValues(t *testing.T) {
	const doc = `{"apiVersion":"resource.k8s.io/v1","metadata":{"name":"c-%d","namespace":"ns","uid":"u-%d","creationTimestamp":"2026-01-01T00:00:00Z"},
		"status":{"allocation":{"devices":{"results":[{"driver":"d","pool":"p","device":"gpu-0"}]},"allocationTimestamp":"2026-01-01T00:00:00Z"}}}`
	a, b := decode(t, doc), decode(t, doc)
	want := decode(t, doc)
	internObject(a)
	internObject(b)
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("interning changed the object: %v", a)
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	keyOf := func(m map[string]any, k string) string {
		for key := range m {
			if key == k {
				return key
			}
		}
		t.Fatalf("no key %q", k)
		return ""
	}
	if !same(keyOf(a, "apiVersion"), keyOf(b, "apiVersion")) {
		t.Error("keys not shared")
	}
	if !same(a["apiVersion"].(string), b["apiVersion"].(string)) {
		t.Error("apiVersion value not shared")
	}
	ma, mb := a["metadata"].(map[string]any), b["metadata"].(map[string]any)
	if !same(ma["namespace"].(string), mb["namespace"].(string)) {
		t.Error("namespace not shared")
	}
	if same(ma["uid"].(string), mb["uid"].(string)) || same(ma["name"].(string), mb["name"].(string)) {
		t.Error("identity strings were interned")
	}
	ra := a["status"].(map[string]any)["allocation"].(map[string]any)["devices"].(map[string]any)["results"].([]any)[0].(map[string]any)
	rb := b["status"].(map[string]any)["allocation"].(map[string]any)["devices"].(map[string]any)["results"].([]any)[0].(map[string]any)
	if !same(ra["pool"].(string), rb["pool"].(string)) {
		t.Error("pool in a list not shared")
	}
}
