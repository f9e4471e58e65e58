package simdevice

// NVIDIA compute-domain DRA driver (driver compute-domain.nvidia.com), as its kubelet plugin
// publishes on every node of an NVLink domain, kubernetes-sigs/dra-driver-nvidia-gpu tag v0.4.1
// (764900e7833798a1528bd52a2af3e1b2d5f7a616):
//   - cmd/compute-domain-kubelet-plugin/deviceinfo.go: ComputeDomainChannelInfo and
//     ComputeDomainDaemonInfo.GetDevice: "channel-<id>" and "daemon-<id>", attributes type
//     ("channel" or "daemon") and id, no capacity;
//   - cmd/compute-domain-kubelet-plugin/driver.go (NewDriver) and nvlib.go: one slice, the pool
//     named after the node, with channel 0 and daemon 0 only (the plugin knows 2048 IMEX
//     channels but publishes the first; with allocationMode All that one claim gets them all).
// A pool with this profile has deviceCount 1, as the driver publishes one of each.

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
)

func computeDomainDevices(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	dev := func(typ string) resourcev1.Device {
		return resourcev1.Device{
			Name:       fmt.Sprintf("%s-%d", typ, p.index),
			Attributes: attrs{"type": str(typ), "id": integer(int64(p.index))},
		}
	}
	return []resourcev1.Device{dev("channel"), dev("daemon")}, nil
}
