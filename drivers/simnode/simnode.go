// Package simnode turns a SimulatedNodes document (schemas/scenario.cue #SimulatedNodes) into
// the Node objects it declares, and applies or deletes them. Expansion is pure; Apply and
// Delete do the I/O. The node machine (machines/node.cue) keeps the nodes Ready afterwards.
package simnode

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Document coordinates. SimulatedNodes is a scenario document, not an API object.
const (
	APIVersion = "draforge.oaslananka/v1alpha1"
	Kind       = "SimulatedNodes"
)

// Labels and annotations of simulated nodes (the node machine reads them).
const (
	// LabelSimulated marks a node as simulated: the node machine keeps it Ready.
	LabelSimulated = "draforge.oaslananka/simulated"
	// LabelSimulatedValue is LabelSimulated's value on the nodes DRAForge creates.
	LabelSimulatedValue = "true"
	// AnnotationLeaseRenewInterval overrides the Lease renew interval (kubelet: 10s).
	AnnotationLeaseRenewInterval = "draforge.oaslananka/lease-renew-interval"
	// AnnotationStatusReportInterval overrides how often an unchanged Ready condition's
	// heartbeat is refreshed (kubelet's nodeStatusReportFrequency: 5m).
	AnnotationStatusReportInterval = "draforge.oaslananka/status-report-interval"
)

// MaxNodes is the most nodes one SimulatedNodes document (and so one `draforge nodes` command)
// declares, by count or by names: the schema's bound (schemas/scenario.cue #SimulatedNodes),
// twice the bench's 5,000 nodes. More nodes take several documents or commands (--start).
const MaxNodes = 10000

// DefaultAllocatable is what a node offers when the document names nothing (the bench's nodes).
var DefaultAllocatable = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("64"),
	corev1.ResourceMemory: resource.MustParse("256Gi"),
	corev1.ResourcePods:   resource.MustParse("110"),
}

// Spec is the spec of a SimulatedNodes document.
type Spec struct {
	Prefix               string            `json:"prefix"`
	Count                int               `json:"count,omitempty"`
	Start                int               `json:"start,omitempty"`
	Names                []string          `json:"names,omitempty"`
	Labels               map[string]string `json:"labels,omitempty"`
	Annotations          map[string]string `json:"annotations,omitempty"`
	Taints               []corev1.Taint    `json:"taints,omitempty"`
	Allocatable          map[string]string `json:"allocatable,omitempty"`
	LeaseRenewInterval   string            `json:"leaseRenewInterval,omitempty"`
	StatusReportInterval string            `json:"statusReportInterval,omitempty"`
	Topology             *Topology         `json:"topology,omitempty"`
	// DeclaredFeatures go to status.declaredFeatures, as a kubelet declares the features its
	// gates turn on (KEP-5328): kube-apiserver admits a ResourceSlice device with
	// nodeAllocatableResources only on a node declaring DRANodeAllocatableResources
	// (plugin/pkg/admission/nodedeclaredfeatures). Sorted and deduplicated, as the API requires.
	DeclaredFeatures []string `json:"declaredFeatures,omitempty"`
}

// Topology lays the nodes out in nested domains, outermost first (zone, block, rack, NVLink
// domain...), each a node label: Levels[0].Count domains, each holding Levels[1].Count domains,
// and so on, the innermost holding NodesPerDomain nodes. The document's node count is the
// product. A node's value for a level is <name>-<i>, i the domain's index among all domains of
// that level in the document (node 0 starts in domain 0 of every level).
type Topology struct {
	Levels         []TopologyLevel `json:"levels"`
	NodesPerDomain int             `json:"nodesPerDomain"`
}

// TopologyLevel is one level of a Topology: its node label key, how many domains of it each
// domain of the level above holds, and the prefix of its label values (default: the key's
// name part, "rack" for topology.kubernetes.io/rack).
type TopologyLevel struct {
	Key   string `json:"key"`
	Count int    `json:"count"`
	Name  string `json:"name,omitempty"`
}

// MaxTopologyLevels bounds Topology.Levels (the schema computes the node count from them).
const MaxTopologyLevels = 4

// nodes is the number of nodes the topology lays out.
func (t *Topology) nodes() int {
	n := t.NodesPerDomain
	for _, l := range t.Levels {
		n *= l.Count
	}
	return n
}

// labels are the topology labels of the document's i-th node.
func (t *Topology) labels(i int) map[string]string {
	out := map[string]string{}
	domain := i / t.NodesPerDomain // index among the innermost domains
	for j := len(t.Levels) - 1; j >= 0; j-- {
		l := t.Levels[j]
		out[l.Key] = l.valuePrefix() + "-" + strconv.Itoa(domain)
		domain /= l.Count
	}
	return out
}

func (l TopologyLevel) valuePrefix() string {
	if l.Name != "" {
		return l.Name
	}
	_, name, found := strings.Cut(l.Key, "/")
	if !found {
		return l.Key
	}
	return name
}

// Decode reads the spec of a SimulatedNodes document that passed the schema. Quantities in
// allocatable may be YAML numbers.
func Decode(u *unstructured.Unstructured) (Spec, error) {
	var s Spec
	raw, ok := u.Object["spec"].(map[string]any)
	if !ok {
		return s, fmt.Errorf("SimulatedNodes %s: no spec", u.GetName())
	}
	raw = maps.Clone(raw)
	if a, ok := raw["allocatable"].(map[string]any); ok {
		str := map[string]any{}
		for k, v := range a {
			str[k] = fmt.Sprint(v)
		}
		raw["allocatable"] = str
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("SimulatedNodes %s: %w (unquoted y, n, yes, no, on, off are booleans in Kubernetes YAML: quote them)", u.GetName(), err)
	}
	return s, s.check()
}

// featureName is a declared feature's name (kubernetes v1.37.2 pkg/apis/core/validation).
var featureName = regexp.MustCompile(`^[A-Z][a-zA-Z0-9]*(/[a-zA-Z][a-zA-Z0-9]*)*$`)

// check repeats what Go needs of the schema's rules, for specs built in Go (the CLI flags).
func (s Spec) check() error {
	if s.Prefix == "" && len(s.Names) == 0 {
		return fmt.Errorf("prefix is required: count and topology name nodes <prefix>-<i>")
	}
	if t := s.Topology; t != nil {
		if err := t.check(); err != nil {
			return fmt.Errorf("topology: %w", err)
		}
		if len(s.Names) > 0 {
			return fmt.Errorf("topology names its nodes by count: names may not be set")
		}
		if s.Count != 0 && s.Count != t.nodes() {
			return fmt.Errorf("count %d: the topology lays out %d nodes", s.Count, t.nodes())
		}
	} else if (s.Count > 0) == (len(s.Names) > 0) {
		return fmt.Errorf("exactly one of count or names must be set")
	}
	if s.Count > MaxNodes || len(s.Names) > MaxNodes {
		return fmt.Errorf("%d nodes: at most %d per document", max(s.Count, len(s.Names)), MaxNodes)
	}
	for k, v := range s.Allocatable {
		if _, err := resource.ParseQuantity(v); err != nil {
			return fmt.Errorf("allocatable %s: %w", k, err)
		}
	}
	for _, f := range s.DeclaredFeatures {
		if len(f) > 253 || !featureName.MatchString(f) {
			return fmt.Errorf("declared feature %q: want an UpperCamelCase name such as DRANodeAllocatableResources", f)
		}
	}
	for _, d := range []string{s.LeaseRenewInterval, s.StatusReportInterval} {
		if d == "" {
			continue
		}
		if v, err := time.ParseDuration(d); err != nil || v < time.Second {
			return fmt.Errorf("interval %q: want a duration of at least 1s", d)
		}
	}
	return nil
}

func (t *Topology) check() error {
	if len(t.Levels) == 0 || len(t.Levels) > MaxTopologyLevels {
		return fmt.Errorf("%d levels: want 1 to %d", len(t.Levels), MaxTopologyLevels)
	}
	if t.NodesPerDomain < 1 || t.NodesPerDomain > MaxNodes {
		return fmt.Errorf("nodesPerDomain %d: want 1 to %d", t.NodesPerDomain, MaxNodes)
	}
	keys := map[string]bool{}
	n := t.NodesPerDomain
	for _, l := range t.Levels {
		if l.Count < 1 || l.Count > MaxNodes {
			return fmt.Errorf("level %s: count %d: want 1 to %d", l.Key, l.Count, MaxNodes)
		}
		if keys[l.Key] {
			return fmt.Errorf("level %s appears twice", l.Key)
		}
		if l.Key == corev1.LabelHostname || l.Key == LabelSimulated {
			return fmt.Errorf("level %s: the node sets that label itself", l.Key)
		}
		keys[l.Key] = true
		// Multiplied one at a time so that a large level cannot overflow the product.
		if n *= l.Count; n > MaxNodes {
			return fmt.Errorf("more than %d nodes", MaxNodes)
		}
	}
	return nil
}

// count is how many nodes are named by count: Count, or the topology's nodes.
func (s Spec) count() int {
	if s.Topology != nil && len(s.Names) == 0 {
		return s.Topology.nodes()
	}
	return s.Count
}

// NodeNames are the names the spec declares, in order.
func (s Spec) NodeNames() []string {
	var out []string
	for i := range s.count() {
		out = append(out, s.Prefix+"-"+strconv.Itoa(s.Start+i))
	}
	for _, n := range s.Names {
		if s.Prefix == "" {
			out = append(out, n) // a whole name
			continue
		}
		out = append(out, s.Prefix+"-"+n)
	}
	return out
}

// Nodes expands the spec into Node objects with their status as a kubelet would post it on
// registration: capacity = allocatable, Ready=True and no pressure, heartbeats at now.
func (s Spec) Nodes(now time.Time) []*corev1.Node {
	alloc := DefaultAllocatable.DeepCopy()
	for k, v := range s.Allocatable {
		alloc[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	t := metav1.NewTime(now.Truncate(time.Second))
	var out []*corev1.Node
	for i, name := range s.NodeNames() {
		labels := map[string]string{}
		maps.Copy(labels, s.Labels)
		if s.Topology != nil {
			maps.Copy(labels, s.Topology.labels(i))
		}
		// Set by every kubelet; the scheduler and DaemonSets select on them. The document may
		// name another OS or architecture (a snapshot of an arm64 node).
		labels[corev1.LabelHostname] = name
		setDefault(labels, corev1.LabelOSStable, "linux")
		setDefault(labels, corev1.LabelArchStable, "amd64")
		labels[LabelSimulated] = LabelSimulatedValue
		annotations := map[string]string{}
		maps.Copy(annotations, s.Annotations)
		if s.LeaseRenewInterval != "" {
			annotations[AnnotationLeaseRenewInterval] = s.LeaseRenewInterval
		}
		if s.StatusReportInterval != "" {
			annotations[AnnotationStatusReportInterval] = s.StatusReportInterval
		}
		if len(annotations) == 0 {
			annotations = nil
		}
		out = append(out, &corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
			Spec:       corev1.NodeSpec{Taints: slices.Clone(s.Taints)},
			Status: corev1.NodeStatus{
				Capacity:    alloc.DeepCopy(),
				Allocatable: alloc.DeepCopy(),
				Conditions:  Conditions(t),
				Addresses:   []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
				NodeInfo:    corev1.NodeSystemInfo{OperatingSystem: labels[corev1.LabelOSStable], Architecture: labels[corev1.LabelArchStable]},
				// nil without features, so an applied status leaves the field alone.
				DeclaredFeatures: slices.Compact(slices.Sorted(slices.Values(s.DeclaredFeatures))),
			},
		})
	}
	return out
}

func setDefault(m map[string]string, k, v string) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// Conditions are the conditions a healthy kubelet posts, with the kubelet's reasons and
// messages (pkg/kubelet/nodestatus/setters.go), heartbeat and transition at t.
func Conditions(t metav1.Time) []corev1.NodeCondition {
	c := func(typ corev1.NodeConditionType, st corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: st, Reason: reason, Message: msg, LastHeartbeatTime: t, LastTransitionTime: t}
	}
	return []corev1.NodeCondition{
		c(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		c(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		c(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		c(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
}

// applyObjects splits a node into what server-side apply sends: the object (labels,
// annotations, taints) and its status subresource.
func applyObjects(n *corev1.Node) (obj, status *unstructured.Unstructured, err error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n)
	if err != nil {
		return nil, nil, err
	}
	meta := map[string]any{"name": n.Name, "labels": m["metadata"].(map[string]any)["labels"]}
	if a, ok := m["metadata"].(map[string]any)["annotations"]; ok {
		meta["annotations"] = a
	}
	obj = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": meta}}
	// Taints are an atomic list: sent only when the document has some, so the not-ready taint
	// the TaintNodesByCondition admission plugin puts on a new node stays for the node
	// lifecycle controller to lift once it sees Ready, as with a registering kubelet.
	if t, ok := m["spec"].(map[string]any)["taints"].([]any); ok && len(t) > 0 {
		obj.Object["spec"] = map[string]any{"taints": t}
	}
	status = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": n.Name}, "status": m["status"]}}
	return obj, status, nil
}
