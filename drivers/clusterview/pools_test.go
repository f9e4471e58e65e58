package clusterview

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/drivers/simdevice"
)

func pool(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": simdevice.Group + "/" + simdevice.Version,
		"kind": simdevice.Kind, "metadata": map[string]any{"namespace": "ns", "name": name}, "spec": spec}}
}

// TestPools: a pool is decoded and defaulted once on its event; a spec that stops decoding
// removes it (it publishes nothing); a delete forgets it.
func TestPools(t *testing.T) {
	p := NewPools()
	p.Upsert(pool("gpus", map[string]any{"deviceType": "gpu", "deviceCount": int64(2), "targetNodes": []any{"node-a"}}))
	p.Upsert(pool("nics", map[string]any{"deviceType": "nic", "deviceCount": int64(1), "targetNodes": []any{"node-a"}}))
	got, ok := p.Get("ns/gpus")
	if !ok || got.Spec.DeviceCount != 2 || got.Spec.DriverName == "" || len(p.List()) != 2 {
		t.Fatalf("decoded pool %+v (found %v, defaulted driver %q), %d pools", got, ok, got.Spec.DriverName, len(p.List()))
	}
	p.Upsert(pool("gpus", map[string]any{"deviceCount": "two"}))
	if _, ok := p.Get("ns/gpus"); ok || len(p.List()) != 1 {
		t.Errorf("a pool whose spec does not decode is still indexed (%d pools)", len(p.List()))
	}
	p.Delete(pool("nics", nil))
	if len(p.List()) != 0 {
		t.Errorf("deleted pool still indexed: %v", p.List())
	}
}
