package e2e

import (
	"fmt"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/simdevice"
)

// TestDeviceGroupsPublishedAtLimits: a pool with deviceGroups at the schema's limits (exactly
// simdevice.MaxDevicesPerNode devices per node: 111 partitionable GPUs with 8 partitions and a
// tainted one, so slices of at most 64 devices and 14 counter-set slices; shared NICs with
// request policies; binding conditions; per-device node selection; a topology) is accepted by
// the API server, and so are all the slices it publishes.
func TestDeviceGroupsPublishedAtLimits(t *testing.T) {
	e := newEnv(t)
	e.Setup(t)
	startController(t)
	ctx := t.Context()
	spec := map[string]any{
		"targetNodes": []any{"node-a"},
		"topology":    map[string]any{"numaNodes": int64(8), "pcieRootsPerNUMANode": int64(8)},
		"deviceGroups": []any{
			map[string]any{"deviceType": "gpu", "count": int64(111), "partitions": int64(8),
				"capacities": map[string]any{"memory": "80Gi", "compute": int64(100)}},
			map[string]any{"deviceType": "nic", "count": int64(15), "allowMultipleAllocations": true,
				"capacities": map[string]any{"bandwidth": "400G", "vfs": int64(8)},
				"requestPolicies": map[string]any{
					"bandwidth": map[string]any{"default": "1G", "validRange": map[string]any{"min": "100M", "max": "400G"}},
					"vfs":       map[string]any{"default": int64(1), "validValues": []any{int64(1), int64(2), int64(4), int64(8)}},
				}},
			map[string]any{"deviceType": "fpga", "count": int64(4), "bindsToNode": true, "bindingDelaySeconds": int64(1),
				"bindingConditions":        []any{"a.example.com/ready", "b", "c", "d"},
				"bindingFailureConditions": []any{"a.example.com/failed", "f", "g", "h"}},
			map[string]any{"deviceType": "remote", "count": int64(3), "perDeviceNodeSelection": true},
			// 2 built-ins + 26 capacities + topology's 2 + a partition's 2 = 32 per device, 27 counters.
			map[string]any{"deviceType": "acc", "count": int64(1), "partitions": int64(2), "capacities": manyCapacities(26)},
		},
		"faults": []any{map[string]any{"device": "gpu-0", "mode": "unhealthy"}},
	}
	if _, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(e.Namespace).Create(ctx, newPool(e.Namespace, "limits", spec), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitPoolReady(t, e.Namespace, "limits")
	list, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		LabelSelector: simdevice.LabelSDPNamespace + "=" + e.Namespace + "," + simdevice.LabelSDPName + "=limits"})
	if err != nil {
		t.Fatal(err)
	}
	var counterSets, devices, perDevice int
	byName := map[string]resourcev1.Device{}
	for _, s := range list.Items {
		counterSets += len(s.Spec.SharedCounters)
		devices += len(s.Spec.Devices)
		if s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection {
			perDevice += len(s.Spec.Devices)
		}
		for _, d := range s.Spec.Devices {
			byName[d.Name] = d
		}
	}
	// 111 GPUs × (whole + 8 partitions) + 15 NICs + 4 FPGAs + 3 remote devices + acc-0 and its 2
	// partitions: the cap.
	const want = 111*9 + 15 + 4 + 3 + 3
	if want != simdevice.MaxDevicesPerNode {
		t.Fatalf("the pool publishes %d devices, not the cap %d", want, simdevice.MaxDevicesPerNode)
	}
	if counterSets != 112 || devices != want || perDevice != 3 {
		t.Fatalf("published %d counter sets, %d devices (%d per-device), want 112, %d, 3", counterSets, devices, perDevice, want)
	}
	if d := byName["acc-0-part-1"]; len(d.Attributes)+len(d.Capacity) != 32 || len(d.ConsumesCounters[0].Counters) != 27 {
		t.Errorf("acc-0-part-1: %d attributes and capacities, %d counters", len(d.Attributes)+len(d.Capacity), len(d.ConsumesCounters[0].Counters))
	}
	if d := byName["gpu-110-part-7"]; len(d.ConsumesCounters) != 1 || d.Attributes[simdevice.AttrPCIeRoot].StringValue == nil {
		t.Errorf("partition gpu-110-part-7: %+v", d)
	}
	if d := byName["nic-0"]; d.AllowMultipleAllocations == nil || d.Capacity["vfs"].RequestPolicy == nil {
		t.Errorf("nic-0 is not shareable with a request policy: %+v", d)
	}
	if d := byName["fpga-0"]; len(d.BindingConditions) != 4 || len(d.BindingFailureConditions) != 4 || d.BindsToNode == nil {
		t.Errorf("fpga-0 binding fields: %+v", d)
	}
	if d := byName["remote-2"]; d.NodeName == nil || *d.NodeName != "node-a" {
		t.Errorf("remote-2 names no node: %+v", d)
	}
	if len(byName["gpu-0-part-3"].Taints) != 1 {
		t.Errorf("the unhealthy fault taints the GPU's partitions too: %+v", byName["gpu-0-part-3"])
	}
}

func manyCapacities(n int) map[string]any {
	out := map[string]any{}
	for i := range n {
		out[fmt.Sprintf("c%d", i)] = int64(100)
	}
	return out
}
