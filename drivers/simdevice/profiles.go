package simdevice

import (
	"crypto/sha256"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// Built-in attributes, always published in the driver's own domain.
const (
	AttrDeviceType = "deviceType"
	AttrIndex      = "index"
)

func str(s string) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{StringValue: ptr.To(s)}
}
func ver(s string) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{VersionValue: ptr.To(s)}
}
func integer(i int64) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{IntValue: ptr.To(i)}
}
func boolean(b bool) resourcev1.DeviceAttribute {
	return resourcev1.DeviceAttribute{BoolValue: ptr.To(b)}
}

// profileAttributes returns a profile's attributes (unqualified names) for device index i.
// The values mirror what the real driver publishes; per-device values (uuid, index, minor,
// pciAddress) differ between devices. Users override any of them with spec.attributes.
func profileAttributes(p Profile, deviceUID string, i int) map[string]resourcev1.DeviceAttribute {
	switch p {
	case ProfileNvidiaGPU: // as published by the NVIDIA DRA driver in the gpu.nvidia.com domain
		return map[string]resourcev1.DeviceAttribute{
			"type":                  str("gpu"),
			"productName":           str("NVIDIA A100-SXM4-80GB"),
			"brand":                 str("Nvidia"),
			"architecture":          str("Ampere"),
			"cudaComputeCapability": ver("8.0.0"),
			"driverVersion":         ver("550.54.15"),
			"cudaDriverVersion":     ver("12.4.0"),
			"uuid":                  str("GPU-" + deviceUID),
			"index":                 integer(int64(i)),
			"minor":                 integer(int64(i)),
		}
	case ProfileMellanoxNIC:
		return map[string]resourcev1.DeviceAttribute{
			"type":            str("nic"),
			"vendor":          str("Mellanox"),
			"productName":     str("ConnectX-7"),
			"firmwareVersion": ver("28.39.1002"),
			"linkSpeedGbps":   integer(400),
			"rdma":            boolean(true),
			"pciAddress":      str(fmt.Sprintf("0000:%02x:00.0", 0x10+i)),
			"index":           integer(int64(i)),
		}
	case ProfileGeneric:
		return map[string]resourcev1.DeviceAttribute{
			"vendor": str("DRAForge"),
			"model":  str("simulated"),
			"index":  integer(int64(i)),
		}
	}
	return nil
}

// profileCapacities returns a profile's capacities (unqualified names).
func profileCapacities(p Profile) map[string]resource.Quantity {
	switch p {
	case ProfileNvidiaGPU:
		return map[string]resource.Quantity{"memory": resource.MustParse("80Gi")}
	case ProfileMellanoxNIC:
		return map[string]resource.Quantity{"bandwidth": resource.MustParse("400G")}
	}
	return nil
}

// deviceUID is a stable UUID-shaped identifier for one device of one SDP on one node.
func deviceUID(namespace, name, node string, i int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%s/%d", namespace, name, node, i))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// deviceData builds the typed, qualified attributes and capacities of device i on node.
// Precedence (later wins): built-ins, profile, spec.attributes / spec.capacities.
func deviceData(p *Pool, node string, i int) (map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, map[resourcev1.QualifiedName]resourcev1.DeviceCapacity) {
	s := &p.Spec
	q := func(domain, name string) resourcev1.QualifiedName {
		return resourcev1.QualifiedName(domain + "/" + name)
	}
	attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		q(s.DriverName, AttrDeviceType): str(s.DeviceType),
		q(s.DriverName, AttrIndex):      integer(int64(i)),
	}
	for k, v := range profileAttributes(s.Profile, deviceUID(p.Namespace, p.Name, node, i), i) {
		attrs[q(s.AttributeDomain, k)] = v
	}
	for k, v := range s.Attributes {
		attrs[q(s.AttributeDomain, k)] = resourcev1.DeviceAttribute{
			StringValue: v.String, IntValue: v.Int, BoolValue: v.Bool, VersionValue: v.Version,
		}
	}
	caps := map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
	for k, v := range profileCapacities(s.Profile) {
		caps[q(s.AttributeDomain, k)] = resourcev1.DeviceCapacity{Value: v}
	}
	for k, v := range s.Capacities {
		caps[q(s.AttributeDomain, k)] = resourcev1.DeviceCapacity{Value: v.DeepCopy()}
	}
	if len(caps) == 0 {
		caps = nil
	}
	return attrs, caps
}

// attributeAndCapacityCount is the number of distinct attributes plus capacities per device.
func attributeAndCapacityCount(s *PoolSpec) int {
	a, c := deviceData(&Pool{Spec: *s}, "", 0)
	return len(a) + len(c)
}
