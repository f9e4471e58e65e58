package simdevice

// Google TPU DRA driver (driver tpu.google.com), as published by kubernetes-sigs/dra-driver-google-tpu
// at commit f5a9d8c8322ba8061112a7115b8ca2597e2a40f1 (after v0.2.0): cmd/tpu-dra-kubeletplugin/manager.go
// GetDevice and getTpuInfo. A TPU v6e host (node label tpu.google.com/accelerator tpu-v6e-slice,
// topology 2x4 with 8 chips per node) binds its chips to vfio, so the devices are named after /dev/vfio/<n>.
// The driver seeds its UUID generator with the node name alone, so every chip of a node carries
// the same uuid; that is mirrored.

import (
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
)

// tpuTopologies are the v6e single-host topologies by chip count; for other counts the topology
// is unknown and, as the driver does then, not published.
var tpuTopologies = map[int]string{1: "1x1", 4: "2x2", 8: "2x4"}

func googleTPU(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	a := attrs{
		"index":       integer(int64(p.index)),
		"uuid":        str("tpu-" + p.nodeUID),
		"tpuGen":      str("v6e"),
		"brand":       str("Google"),
		"accelerator": str("tpu-v6e-slice"),
		// The node's chip count (the driver requires it to equal the chips found).
		"chipCount": integer(int64(p.spec.DeviceCount)),
	}
	if t, ok := tpuTopologies[p.spec.DeviceCount]; ok {
		a["topology"] = str(t)
	}
	return []resourcev1.Device{{Name: strconv.Itoa(p.index), Attributes: a}}, nil
}
