package simdevice

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The NVLink clique of a node, as GPU Feature Discovery labels it and DRAForge keeps it while the
// node's GPUs' fabric is detached (machines/gpuclique.cue, drivers/gpufabric).
const (
	// CliqueLabel is GFD's node label "<cluster UUID>.<clique ID>": the NVLink domain (e.g. one
	// NVL72 rack) the node's GPUs belong to.
	CliqueLabel = "nvidia.com/gpu.clique"
	// DetachedCliqueAnnotation keeps a node's clique while its fabric is detached and the label
	// is gone, so the label comes back when the fabric does.
	DetachedCliqueAnnotation = "draforge.oaslananka/detached-gpu-clique"
)

// Clique is the NVLink clique a node's GPUs belong to: its label, or while its fabric is detached
// the kept one ("" for a node without NVLink).
func Clique(labels, annotations map[string]string) string {
	if c, ok := labels[CliqueLabel]; ok {
		return c
	}
	return annotations[DetachedCliqueAnnotation]
}

// LeftClique returns the clique a node left while its fabric is detached (label gone, kept in
// the annotation), and whether it did.
func LeftClique(labels, annotations map[string]string) (string, bool) {
	if _, labelled := labels[CliqueLabel]; labelled {
		return "", false
	}
	c, kept := annotations[DetachedCliqueAnnotation]
	return c, kept
}

// hardwareLabels are a node's labels as its devices' pools see them: with its clique label while
// the label is gone for a detached fabric. A pool selecting nodes by clique keeps publishing the
// GPUs that took the node out of it (else the label would come back, and go again, forever).
func hardwareLabels(node *corev1.Node) map[string]string {
	c, left := LeftClique(node.Labels, node.Annotations)
	if !left {
		return node.Labels
	}
	l := maps.Clone(node.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[CliqueLabel] = c
	return l
}

// NVLinkFabric counts the NVIDIA GPUs the pool has on node, as NVML enumerates them (a device
// that disappeared is not there), and those whose NVLink fabric is attached (no fabric-detached
// fault on that node by now). Pools of other drivers have none. GPU Feature Discovery labels a node's
// NVLink clique only from attached GPUs (NVIDIA/k8s-device-plugin internal/lm/imex.go
// getFabricIDs, go-nvlib IsFabricAttached), so a node whose GPUs are all detached has no clique.
// The pool must be valid.
func (p *Pool) NVLinkFabric(node string, now time.Time) (gpus, attached int) {
	s := &p.Spec
	if profiles[s.Profile].driver != NvidiaDriverName || len(s.DeviceGroups) > 0 {
		return 0, 0
	}
	gone := make([]bool, s.DeviceCount)
	detached := make([]bool, s.DeviceCount)
	for _, f := range append(s.CampaignFaults(node, p.Elapsed(now)), s.Faults...) {
		if f.Node != "" && f.Node != node {
			continue
		}
		ref, err := s.faultTarget(f.Device)
		if err != nil || ref.index >= s.DeviceCount {
			continue
		}
		switch f.Mode {
		case FaultDisappear:
			gone[ref.index] = true
		case FaultFabricDetached:
			detached[ref.index] = true
		}
	}
	for i := range s.DeviceCount {
		if gone[i] {
			continue
		}
		gpus++
		if !detached[i] {
			attached++
		}
	}
	return gpus, attached
}
