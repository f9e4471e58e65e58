//go:build reliability

package reliability

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice/pooltest"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// TestInvalidPools: the API server rejects invalid SimulatedDevicePools with the CRD's
// OpenAPI and CEL messages (nothing reaches the controller), and a pool that passes CRD
// validation but conflicts with another pool's DRA pool name is reported by the controller
// as Ready=False InvalidSpec naming the other pool.
func TestInvalidPools(t *testing.T) {
	e := newEnv(t)
	base := func() map[string]any {
		return map[string]any{"deviceType": "gpu", "deviceCount": int64(1), "targetNodes": []any{"node-a"}}
	}
	with := func(k string, v any) map[string]any {
		s := base()
		s[k] = v
		return s
	}
	for _, tc := range []struct {
		name string
		spec map[string]any
		want []string
	}{
		{"device-count-zero", with("deviceCount", int64(0)), []string{"spec.deviceCount", "should be greater than or equal to 1"}},
		{"device-count-129", with("deviceCount", int64(129)), []string{"spec.deviceCount", "should be less than or equal to 128"}},
		{"bad-driver-name", with("driverName", "Bad_Driver"), []string{"spec.driverName", "should match"}},
		{"attribute-two-values", with("attributes", map[string]any{"model": map[string]any{"string": "H100", "int": int64(3)}}),
			[]string{"spec.attributes.model", "Too many: 2: must have at most 1 item"}},
		{"bad-quantity", with("capacities", map[string]any{"memory": "80Qi"}), []string{"spec.capacities.memory", "should match"}},
		{"bad-version", with("attributes", map[string]any{"driverVersion": map[string]any{"version": "1.2"}}),
			[]string{"spec.attributes.driverVersion.version", "should match"}},
		{"fault-out-of-range", map[string]any{"deviceType": "gpu", "deviceCount": int64(2), "targetNodes": []any{"node-a"},
			"faults": []any{map[string]any{"device": int64(5), "mode": "unhealthy"}}},
			[]string{"spec.faults", "spec.faults[].device must be an index below deviceCount"}},
		{"no-targets", map[string]any{"deviceType": "gpu", "deviceCount": int64(1)},
			[]string{"at least one of spec.nodeSelector or spec.targetNodes must be set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Create(t.Context(),
				pooltest.Object(e.Namespace, tc.name, tc.spec), metav1.CreateOptions{})
			if err == nil {
				t.Fatal("accepted, want rejected")
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("want 422 Invalid, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message does not contain %q:\n%v", w, err)
				}
			}
		})
	}

	t.Run("pool-name-conflict", func(t *testing.T) {
		e2eutil.StartController(t, e.Kubeconfig, allocatorFlag, "simulator")
		createPool(t, e, "first", base())
		e.WaitPoolReady(t, e.Namespace, "first")
		createPool(t, e, "second", with("poolName", "first"))
		eventually(t, 30*time.Second, func() (bool, string) {
			u := getPool(t, e, "second")
			c := e2eutil.Condition(u, "Ready")
			return e2eutil.ConditionIs(u, "Ready", "False") && c["reason"] == "InvalidSpec" &&
				strings.Contains(fmt.Sprint(c["message"]), "already published by SimulatedDevicePool first"), fmt.Sprint(u.Object["status"])
		})
		if s := e.PoolSlices(t, e.Namespace, "second"); len(s) != 0 {
			t.Errorf("the conflicting pool published %v", s)
		}
		if s := e.PoolSlices(t, e.Namespace, "first"); len(s) != 1 {
			t.Errorf("the first pool: %v", s)
		}
	})
}
