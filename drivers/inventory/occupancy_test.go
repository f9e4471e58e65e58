package inventory_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/inventory"
	it "github.com/draforge/draforge/drivers/inventory/inventorytest"
)

func devicesOf(s *inventory.Snapshot) []inventory.DeviceView {
	var out []inventory.DeviceView
	for _, p := range inventory.Pools(s, true) {
		out = append(out, p.DeviceList...)
	}
	return out
}

// One row per node with counts and a cell per device; a tainted allocated device is both; a
// Node without devices still gets a row; devices of unknown nodes get one too.
func TestOccupancy(t *testing.T) {
	s := it.Healthy()
	s.Nodes = append(s.Nodes, it.Node("node-10"), it.Node("node-9"))
	// node-b gpu-1 tainted; node-a gpu-0 is allocated to demo/used.
	for _, sl := range s.Slices {
		if ptr.Deref(sl.Spec.NodeName, "") == "node-b" {
			sl.Spec.Devices[1].Taints = []resourcev1.DeviceTaint{{Key: "k", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
		if ptr.Deref(sl.Spec.NodeName, "") == "node-a" {
			sl.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "k", Effect: resourcev1.DeviceTaintEffectNoExecute}}
		}
	}
	s.Sort()
	devs := devicesOf(s)
	devs = append(devs, inventory.DeviceView{Driver: "d", Pool: "p", Node: "ghost", Name: "x", Healthy: true})
	rows := inventory.Occupancy(s, devs)
	var names []string
	for _, r := range rows {
		names = append(names, r.Node)
	}
	if want := []string{"ghost", "node-9", "node-10", "node-a", "node-b"}; !equal(names, want) {
		t.Fatalf("rows %v, want %v", names, want)
	}
	a, b := rows[3], rows[4]
	if a.Strip != "xf" || a.Allocated != 1 || a.Tainted != 1 || a.Free != 1 || a.Devices != 2 || !a.Known || a.Labels["kubernetes.io/hostname"] != "node-a" {
		t.Errorf("node-a %+v", a)
	}
	if b.Strip != "ft" || b.Allocated != 0 || b.Tainted != 1 || b.Free != 1 || len(b.Pools) != 1 {
		t.Errorf("node-b %+v", b)
	}
	if rows[1].Devices != 0 || rows[1].Strip != "" || !rows[1].Known {
		t.Errorf("node-9 %+v", rows[1])
	}
	if rows[0].Known || rows[0].Strip != "f" {
		t.Errorf("ghost %+v", rows[0])
	}
}

// Pods lists pods with claims, the devices their allocated claims hold (with node), pending
// claims and the scheduler's message; pods without claims are left out.
func TestPods(t *testing.T) {
	s := it.Healthy()
	pending := it.Pod("demo", "stuck", "waiting", "")
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/2 nodes are available"}}
	plain := &corev1.Pod{}
	plain.Namespace, plain.Name = "demo", "plain"
	s.Pods = append(s.Pods, pending, plain)
	s.Sort()
	pods := inventory.Pods(s)
	if len(pods) != 2 {
		t.Fatalf("pods %+v", pods)
	}
	stuck, worker := pods[0], pods[1]
	if stuck.Name != "stuck" || stuck.PendingClaims != 1 || stuck.Unschedulable != "0/2 nodes are available" || len(stuck.Devices) != 0 || stuck.Phase != "Pending" {
		t.Errorf("stuck %+v", stuck)
	}
	if worker.Node != "node-a" || len(worker.Devices) != 1 || worker.Devices[0].Device != "gpu-0" || worker.Devices[0].Node != "node-a" || worker.Devices[0].Claim != "used" {
		t.Errorf("worker %+v", worker)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestOccupancyDriverHealthTaints: the NVIDIA driver's health taints as the simulated driver
// publishes them (simdevice's driver-shaped faults) show in the occupancy views like any other:
// an XID 79 (NoSchedule) marks its device tainted, an ignored XID 13 (effect None) does not.
func TestOccupancyDriverHealthTaints(t *testing.T) {
	s := it.Healthy()
	for _, sl := range s.Slices {
		if ptr.Deref(sl.Spec.NodeName, "") == "node-b" {
			sl.Spec.Devices[0].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "13", Effect: resourcev1.DeviceTaintEffectNone}}
			sl.Spec.Devices[1].Taints = []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
	}
	s.Sort()
	found := false
	for _, r := range inventory.Occupancy(s, devicesOf(s)) {
		if r.Node != "node-b" {
			continue
		}
		found = true
		if r.Strip != "ft" || r.Tainted != 1 {
			t.Errorf("node-b %+v, want gpu-0 free (XID 13 is informational) and gpu-1 tainted (XID 79)", r)
		}
	}
	if !found {
		t.Fatal("no row for node-b")
	}
}
