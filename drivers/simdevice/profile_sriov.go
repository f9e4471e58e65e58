package simdevice

// SR-IOV network DRA driver (driver sriovnetwork.k8snetworkplumbingwg.io), as published by
// k8snetworkplumbingwg/dra-driver-sriov at commit cd9404f0301e088653abb562df6ed8b106b097d6:
// pkg/devicestate/discovery.go (DiscoverSriovDevices: one device per virtual function, named after
// its PCI address with '-' for ':' and '.'), pkg/consts/consts.go (attribute names: the driver
// writes its own ones qualified, plus k8s.cni.cncf.io/deviceID, dra.net/numaNode and the standard
// resource.kubernetes.io/pciBusID and pcieRoot), pkg/driver/driver.go (one slice; only the VFs a
// SriovResourcePolicy selects are advertised, here all of them). The simulated host has ConnectX-7
// ports (vendor 15b3, PF device 1021, VF device 101e) in Ethernet mode, 8 VFs per port, each port
// behind the PCIe root complex of a GPU pair (see pciTopology), so GPU and NIC align on pcieRoot.

import (
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
)

const (
	sriovDomain    = "sriovnetwork.k8snetworkplumbingwg.io/"
	sriovVFsPerPF  = 8
	sriovVFsOffset = 2 // ConnectX VFs follow the PF's two functions
)

// sriovPF returns the PCI address, root complex and NUMA node of NIC port i: on the root complex
// of GPUs 2*(i/2) and 2*(i/2)+1 of its PCI domain.
func sriovPF(i int) (domain, bus int, root string, numa int64) {
	_, root, numa = pciTopology(i)
	j := i % 8
	return i / 8, (j/2)*0x40 + 0x0c + (j%2)*0x10, root, numa
}

func sriovVF(p physical) ([]resourcev1.Device, []resourcev1.CounterSet) {
	domain, bus, root, numa := sriovPF(p.index)
	pf := fmt.Sprintf("%04x:%02x:00.0", domain, bus)
	var devs []resourcev1.Device
	for vf := range sriovVFsPerPF {
		fn := vf + sriovVFsOffset
		addr := fmt.Sprintf("%04x:%02x:%02x.%d", domain, bus, fn/8, fn%8)
		devs = append(devs, resourcev1.Device{
			Name: strings.NewReplacer(":", "-", ".", "-").Replace(addr),
			Attributes: attrs{
				sriovDomain + "vendor":       str("15b3"),
				sriovDomain + "deviceID":     str("101e"),
				sriovDomain + "pfDeviceID":   str("1021"),
				sriovDomain + "pciAddress":   str(addr),
				"k8s.cni.cncf.io/deviceID":   str(addr),
				sriovDomain + "PFName":       str(fmt.Sprintf("ens%df0np0", p.index+1)),
				sriovDomain + "EswitchMode":  str("legacy"),
				sriovDomain + "vfID":         integer(int64(vf)),
				AttrPCIeRoot:                 str(root),
				sriovDomain + "pfPciAddress": str(pf),
				AttrPCIBusID:                 str(addr),
				sriovDomain + "linkType":     str("ethernet"),
				sriovDomain + "rdmaCapable":  boolean(true),
				"dra.net/numaNode":           integer(numa),
			},
		})
	}
	return devs, nil
}
