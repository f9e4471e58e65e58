package poolfaults

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/simdevice"
)

func pool(spec simdevice.PoolSpec) *simdevice.Pool {
	spec.TargetNodes = []string{"node-a"}
	p := &simdevice.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: spec}
	p.Default()
	return p
}

func TestSetReplacesFaultOfSameDevice(t *testing.T) {
	p := pool(simdevice.PoolSpec{DeviceType: "gpu", DeviceCount: 2})
	p.Spec.Faults = []simdevice.Fault{{Device: DeviceRef("1"), Mode: simdevice.FaultUnhealthy}}
	out, err := Set(p, DeviceRef("gpu-1"), "", simdevice.FaultDisappear)
	if err != nil || len(out) != 1 || out[0].Mode != simdevice.FaultDisappear {
		t.Fatalf("got %v %v, want one disappear fault (index 1 and gpu-1 are one device)", out, err)
	}
	if _, err := Set(p, DeviceRef("gpu-2"), "", simdevice.FaultUnhealthy); err == nil || !strings.Contains(err.Error(), "gpu-0..gpu-1") {
		t.Fatalf("want an error naming the devices, got %v", err)
	}
}

func TestSetOnDeviceGroups(t *testing.T) {
	p := pool(simdevice.PoolSpec{DeviceGroups: []simdevice.DeviceGroup{
		{DeviceType: "gpu", Count: 2, BindingConditions: []string{"ready"}, BindingFailureConditions: []string{"failed"}},
		{DeviceType: "nic", Count: 1},
	}})
	out, err := Set(p, DeviceRef("gpu-1"), "", simdevice.FaultBindingFailure)
	if err != nil || len(out) != 1 {
		t.Fatalf("got %v %v", out, err)
	}
	p.Spec.Faults = out
	if out, err = Set(p, DeviceRef("nic-0"), "", simdevice.FaultUnhealthy); err != nil || len(out) != 2 {
		t.Fatalf("a fault on another group's device is added: %v %v", out, err)
	}
	if out, err = Set(p, DeviceRef("gpu-1"), "", simdevice.FaultHealthy); err != nil || len(out) != 0 {
		t.Fatalf("healthy removes the device's fault: %v %v", out, err)
	}
	if _, err := Set(p, DeviceRef("0"), "", simdevice.FaultUnhealthy); err == nil || !strings.Contains(err.Error(), "gpu-0..gpu-1, nic-0..nic-0") {
		t.Fatalf("an index names no device with deviceGroups: %v", err)
	}
}
