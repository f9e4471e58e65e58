package simdevice

// AMD GPU DRA driver (driver gpu.amd.com), as published by ROCm/k8s-gpu-dra-driver at commit
// 2622427226d5ac361c3588284f4815e0dae11eaa: cmd/gpu-kubeletplugin/deviceinfo.go (AmdGpuInfo and
// AmdPartitionInfo GetDevice, names "gpu-<card>-<render>") and discovery.go (an SPX GPU is one
// "amdgpu" device; a GPU in another compute partition mode is published as its partitions only,
// "amdgpu-partition" devices carrying the parent's PCI address and device ID). Values of an
// MI300X as in docs/demo.md (304 compute units, 1216 SIMD units, 196592Mi). Partitions are
// static (created on the host), so they are plain devices without shared counters.

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// amdCPXPartitions is the number of CPX partitions of an MI300X (one per XCD).
const amdCPXPartitions = 8

func amdParent(p physical) (bus, root, deviceID string) {
	bus, root, _ = pciTopology(p.index)
	return bus, root, fmt.Sprintf("%d", 994913940318892495+int64(p.index))
}

func amdCommon(p physical, own attrs) attrs {
	_, root, _ := amdParent(p)
	a := attrs{
		"family":           str("AI"),
		"productName":      str("AMD_Instinct_MI300X_OAM"),
		"driverVersion":    ver("6.12.12"),
		"driverSrcVersion": str("7AA72EC2C8F513519BE86FD"),
		AttrPCIeRoot:       str(root),
	}
	for k, v := range own {
		a[k] = v
	}
	return a
}

func amdCaps(memory string, cus, simds int64) caps {
	return caps{
		"memory":       capacity(memory),
		"computeUnits": {Value: *resource.NewQuantity(cus, resource.BinarySI)},
		"simdUnits":    {Value: *resource.NewQuantity(simds, resource.BinarySI)},
	}
}

func amdGPU(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	bus, _, deviceID := amdParent(p)
	card, render := p.index, 128+p.index
	return []resourcev1.Device{{
		Name: fmt.Sprintf("gpu-%d-%d", card, render),
		Attributes: amdCommon(p, attrs{
			"type":             str("amdgpu"),
			"pciAddr":          str(bus),
			"cardIndex":        integer(int64(card)),
			"renderIndex":      integer(int64(render)),
			"deviceID":         str(deviceID),
			"partitionProfile": str("spx_nps1"),
		}),
		Capacity: amdCaps("196592Mi", 304, 1216),
	}}, nil
}

func amdGPUCPX(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	bus, _, deviceID := amdParent(p)
	var devs []resourcev1.Device
	for j := range amdCPXPartitions {
		card := p.index*amdCPXPartitions + j
		render := 128 + card
		devs = append(devs, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d-%d", card, render),
			Attributes: amdCommon(p, attrs{
				"type":             str("amdgpu-partition"),
				"parentPciAddr":    str(bus),
				"cardIndex":        integer(int64(card)),
				"renderIndex":      integer(int64(render)),
				"parentDeviceID":   str(deviceID),
				"partitionProfile": str("cpx_nps1"),
			}),
			Capacity: amdCaps("24574Mi", 304/amdCPXPartitions, 1216/amdCPXPartitions),
		})
	}
	return devs, nil
}
