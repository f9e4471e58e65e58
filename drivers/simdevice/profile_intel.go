package simdevice

// Intel GPU DRA driver (driver gpu.intel.com), as published by
// intel/intel-resource-drivers-for-kubernetes at commit 1da939faa33a90dd641d0327cdcdcbbfaa1acdb4
// (after gpu-v0.11.0): cmd/kubelet-gpu-plugin/node_state.go GetResources, device names from
// pkg/helpers/device.go DeviceUIDFromPCIinfo ("0000-04-00-0-0xe211"), example values from
// doc/gpu/USAGE.md (an xe-bound GPU with 24480Mi). One slice per node.

import (
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/draforge/draforge/drivers/devicehealth"
)

func intelGPU(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	// The documented host: discrete GPUs behind root complex 00, the first at 0000:04:00.0.
	// Sixteen GPUs per PCI domain.
	domain := p.index / 16
	bus, root := fmt.Sprintf("%04x:%02x:00.0", domain, 0x04+0x10*(p.index%16)), fmt.Sprintf("pci%04x:00", domain)
	const pciID = "0xe211"
	name := strings.NewReplacer(":", "-", ".", "-").Replace(bus) + "-" + pciID
	return []resourcev1.Device{{
		Name: name,
		Attributes: attrs{
			"model":         str("Unknown"),
			"family":        str("Unknown"),
			"driver":        str("xe"),
			"sriov":         boolean(true),
			"type":          str("gpu"),
			"pciId":         str(pciID),
			"pciAddress":    str(bus), // deprecated upstream in favour of resource.kubernetes.io/pciBusID
			AttrIntelHealth: str(devicehealth.IntelHealthy),
			"pciRoot":       str(root[len(root)-2:]), // deprecated: the bus of the root only
			AttrPCIeRoot:    str(root),
			AttrPCIBusID:    str(bus),
		},
		Capacity: caps{
			"memory":     capacity(fmt.Sprintf("%dMi", 24480)),
			"millicores": {Value: *resource.NewQuantity(1000, resource.DecimalSI)},
		},
	}}, nil
}
