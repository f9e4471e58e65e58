// Package pooltest builds SimulatedDevicePools for tests and benchmarks, typed or as the API
// server serves them. (simdevice's own tests, in package simdevice, cannot import it.)
package pooltest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draforge/draforge/drivers/simdevice"
)

// Pool returns the pool ns/name with uid (may be empty) and spec, defaulted as the controller
// defaults a decoded pool.
func Pool(ns, name string, uid types.UID, spec simdevice.PoolSpec) *simdevice.Pool {
	p := &simdevice.Pool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}, Spec: spec}
	p.Default()
	return p
}

// Object returns the pool ns/name with spec (JSON-like) as an unstructured object with its
// apiVersion and kind, ready to create.
func Object(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": simdevice.Group + "/" + simdevice.Version, "kind": simdevice.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
}
