package explain

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/gpufabric"
	"github.com/draforge/draforge/drivers/inventory"
	it "github.com/draforge/draforge/drivers/inventory/inventorytest"
)

func renderPod(t *testing.T, s *inventory.Snapshot, ns, name string) (*PodResult, string) {
	t.Helper()
	r, err := ExplainPod(t.Context(), s, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := RenderPod(&b, r, RenderOptions{Devices: true}); err != nil {
		t.Fatal(err)
	}
	return r, b.String()
}

// templatePod is a pod using template tmpl through its entry "gpu", with the generated claim
// recorded in its status when generated != "".
func templatePod(ns, name, tmpl, generated string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-pod-" + name)},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl)}}}}
	if generated != "" {
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(generated)}}
	}
	return p
}

func unschedulable(p *corev1.Pod, msg string) {
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
}

// A pending pod whose generated claim cannot be allocated (every GPU taken) shows the claim's
// per-request, per-node explanation and the scheduler's own message.
func TestPodPendingOnClaimAndScheduler(t *testing.T) {
	s := it.Healthy()
	// Take the three free GPUs.
	for i, at := range [][2]string{{"node-a", "gpu-1"}, {"node-b", "gpu-0"}, {"node-b", "gpu-1"}} {
		c := it.Claim("demo", "taken-"+string(rune('a'+i)), "gpu")
		it.Allocate(c, "demo", "gpus", at[0], at[1])
		s.Claims = append(s.Claims, c)
	}
	gen := it.Claim("demo", "trainer-gpu-x7k2p", "gpu")
	gen.Annotations = map[string]string{podClaimNameAnnotation: "gpu"}
	s.Claims = append(s.Claims, gen)
	pod := templatePod("demo", "trainer", "one-gpu", "trainer-gpu-x7k2p")
	unschedulable(pod, "0/2 nodes are available: 1 Insufficient cpu, 2 cannot allocate all claims. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
	s.Pods = append(s.Pods, pod)
	s.Sort()
	r, out := renderPod(t, s, "demo", "trainer")
	if len(r.Claims) != 1 || r.Claims[0].Claim != "trainer-gpu-x7k2p" || r.Claims[0].Explanation == nil {
		t.Fatalf("claims %+v", r.Claims)
	}
	if r.Claims[0].Explanation.Explanation.Allocatable {
		t.Errorf("claim should not be allocatable: %+v", r.Claims[0].Explanation.Explanation)
	}
	for _, want := range []string{
		"Scheduler: Unschedulable: 0/2 nodes are available: 1 Insufficient cpu",
		"claim trainer-gpu-x7k2p pending:",
		"Claim gpu (template one-gpu → trainer-gpu-x7k2p):",
		"AlreadyAllocated: allocated to claim demo/taken-a",
		"node-b       does not fit",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	golden(t, "pod-pending.txt", out)
}

// A template entry without a generated claim says so instead of explaining nothing.
func TestPodTemplateClaimNotGenerated(t *testing.T) {
	s := it.Healthy()
	s.Pods = append(s.Pods, templatePod("demo", "early", "one-gpu", ""))
	s.Sort()
	r, out := renderPod(t, s, "demo", "early")
	if r.Claims[0].Claim != "" || !strings.Contains(r.Claims[0].Problem, `template "one-gpu"`) {
		t.Fatalf("claims %+v", r.Claims)
	}
	if !strings.HasPrefix(r.Summary, "pending: claim gpu: no ResourceClaim has been generated") {
		t.Errorf("summary %q", r.Summary)
	}
	golden(t, "pod-not-generated.txt", out)
}

// A generated claim seen before the pod's status names it is found by its owner and
// annotation.
func TestPodTemplateClaimByOwner(t *testing.T) {
	s := it.Healthy()
	pod := templatePod("demo", "quick", "one-gpu", "")
	gen := it.Claim("demo", "quick-gpu-abcde", "gpu")
	gen.Annotations = map[string]string{podClaimNameAnnotation: "gpu"}
	gen.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "quick", UID: pod.UID, Controller: ptr.To(true)}}
	other := it.Claim("demo", "not-mine", "gpu")
	other.Annotations = map[string]string{podClaimNameAnnotation: "gpu"}
	s.Claims = append(s.Claims, other, gen)
	s.Pods = append(s.Pods, pod)
	s.Sort()
	r, _ := renderPod(t, s, "demo", "quick")
	if r.Claims[0].Claim != "quick-gpu-abcde" {
		t.Fatalf("claims %+v", r.Claims)
	}
}

// A running pod says which devices it holds, with pool and node, and whether its claims are
// reserved for it.
func TestPodRunningHoldsDevices(t *testing.T) {
	s := it.Healthy()
	pod := s.Pods[0]
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	r, out := renderPod(t, s, "demo", "worker")
	if r.Scheduler != nil || len(r.Devices) != 1 || r.Devices[0].Node != "node-a" || !r.Claims[0].ReservedForPod {
		t.Fatalf("result %+v", r)
	}
	want := "running on node node-a; holds used:gpu=sim.draforge.oaslananka/demo/gpus/node-a/gpu-0"
	if r.Summary != want {
		t.Errorf("summary %q, want %q", r.Summary, want)
	}
	golden(t, "pod-running.txt", out)

	// The same pod bound but its claim reserved for someone else.
	s.Claims[0].Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "other", UID: "uid-other"}}
	r, out = renderPod(t, s, "demo", "worker")
	if r.Claims[0].ReservedForPod || !strings.Contains(r.Summary, "not reserved for the pod: used") || !strings.Contains(out, "(not reserved for this pod)") {
		t.Errorf("unreserved claim not reported: %s\n%s", r.Summary, out)
	}
}

// A pod naming a claim that does not exist, and a pod that is not there.
func TestPodMissingClaimAndPod(t *testing.T) {
	s := it.Healthy()
	s.Pods = append(s.Pods, it.Pod("demo", "orphan", "gone", ""))
	s.Sort()
	r, _ := renderPod(t, s, "demo", "orphan")
	if r.Claims[0].Problem != "ResourceClaim demo/gone does not exist" {
		t.Errorf("problem %q", r.Claims[0].Problem)
	}
	_, err := ExplainPod(t.Context(), s, "demo", "nope")
	if !IsPodNotFound(err) || IsNotFound(err) || err.Error() != `Pod "nope" not found in namespace "demo"` {
		t.Errorf("got %v", err)
	}
}

// gangPod is a pod of PodGroup group, using the group's claim entry "gpu".
func gangPod(name, group, node, claim string) *corev1.Pod {
	p := templatePod("demo", name, "one-gpu", claim)
	p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	p.Spec.NodeName = node
	return p
}

// A gang member shows its PodGroup: minCount, members placed, kube-scheduler's verdict on the
// group; a running member's claim made for the PodGroup counts as reserved for it.
func TestPodGang(t *testing.T) {
	s := it.Healthy()
	shared := it.Claim("demo", "shared-gpu-x1", "gpu")
	it.Allocate(shared, "demo", "gpus", "node-b", "gpu-0")
	shared.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "shared", UID: "uid-pg"}}
	s.Claims = append(s.Claims, shared)
	waiting := func(name string) *corev1.Pod {
		p := gangPod(name, "big", "", "")
		unschedulable(p, "pod group is unschedulable, 0/1 placements are available, first placement status: minCount (3) cannot be satisfied: 1 scheduled, 1 remaining")
		return p
	}
	running := gangPod("shared-0", "shared", "node-b", "shared-gpu-x1")
	running.Status.Phase = corev1.PodRunning
	s.Pods = append(s.Pods, running, gangPod("shared-1", "shared", "node-b", "shared-gpu-x1"), waiting("big-0"), waiting("big-1"), waiting("big-2"))
	s.PodGroups = []*schedulingv1beta1.PodGroup{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "shared", UID: "uid-pg"},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}},
				ResourceClaims: []schedulingv1beta1.PodGroupResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}},
			Status: schedulingv1beta1.PodGroupStatus{ResourceClaimStatuses: []schedulingv1beta1.PodGroupResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("shared-gpu-x1")}},
				Conditions: []metav1.Condition{{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "big"},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
			Status: schedulingv1beta1.PodGroupStatus{Conditions: []metav1.Condition{{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
				Reason: "Unschedulable", Message: "pod group is unschedulable, 0/1 placements are available"}}}},
	}
	s.PodGroupsRead = true
	s.Sort()

	r, out := renderPod(t, s, "demo", "big-1")
	if g := r.Gang; g == nil || !g.Found || g.Policy != "gang" || g.MinCount != 3 || g.Members != 3 || g.Placed != 0 || g.Scheduling == nil || g.Scheduling.Reason != "Unschedulable" {
		t.Fatalf("gang %+v", r.Gang)
	}
	for _, want := range []string{
		"gang big: 0 of 3 pods placed, minCount 3",
		"Gang:      PodGroup big (gang, minCount 3)",
		"  Members: 3 pods, 0 placed",
		"  Scheduled: False (Unschedulable): pod group is unschedulable, 0/1 placements are available",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pending member: output lacks %q:\n%s", want, out)
		}
	}

	r, out = renderPod(t, s, "demo", "shared-0")
	if !r.Claims[0].ReservedForPod || strings.Contains(out, "not reserved") {
		t.Errorf("a claim reserved for the pod's PodGroup is not reserved for it:\n%s", out)
	}
	for _, want := range []string{
		"running on node node-b; holds shared-gpu-x1:gpu=sim.draforge.oaslananka/demo/gpus/node-b/gpu-0",
		"  Members: 2 pods, 2 placed",
		"  Claim gpu: shared-gpu-x1 (made for the PodGroup, shared by its pods)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("running member: output lacks %q:\n%s", want, out)
		}
	}

	// A member whose PodGroup does not exist yet.
	s.PodGroups = nil
	if r, out = renderPod(t, s, "demo", "big-0"); r.Gang.Found || !strings.Contains(r.Summary, "PodGroup big does not exist") || !strings.Contains(out, "(not found: kube-scheduler places no member until it exists)") {
		t.Errorf("missing PodGroup: %s\n%s", r.Summary, out)
	}
	// A snapshot that did not read PodGroups (serve's) claims nothing about the group.
	s.PodGroupsRead = false
	if r, out = renderPod(t, s, "demo", "big-0"); !r.Gang.Unread || strings.Contains(r.Summary, "does not exist") || !strings.Contains(out, "(PodGroups were not read for this view)") || !strings.Contains(out, "Members: 3 pods, 0 placed") {
		t.Errorf("unread PodGroups: %s\n%s", r.Summary, out)
	}
}

// A pending pod that needs an NVLink clique names the nodes that left theirs; a pod that does
// not need one, or is already placed, does not.
func TestPodNeedingCliqueNamesNodesOutOfIt(t *testing.T) {
	s := it.Healthy()
	const clique = "a1b2c3d4-e5f6-7890-abcd-ef1234567890.0"
	for _, n := range s.Nodes {
		switch n.Name {
		case "node-a":
			n.Annotations = map[string]string{gpufabric.DetachedCliqueAnnotation: clique}
		case "node-b":
			n.Labels = map[string]string{gpufabric.CliqueLabel: clique}
		}
	}
	affinity := func(op corev1.NodeSelectorOperator) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: gpufabric.CliqueLabel, Operator: op}}}}}}}
	}
	pod := func(name string, a *corev1.Affinity, selector map[string]string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name}, Spec: corev1.PodSpec{Affinity: a, NodeSelector: selector}}
		unschedulable(p, "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.")
		s.Pods = append(s.Pods, p)
	}
	pod("affinity", affinity(corev1.NodeSelectorOpExists), nil)
	pod("selector", nil, map[string]string{gpufabric.CliqueLabel: clique})
	pod("pod-affinity", &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{TopologyKey: gpufabric.CliqueLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": "train"}}}}}}, nil)
	pod("avoids-cliques", affinity(corev1.NodeSelectorOpDoesNotExist), nil)
	pod("another-clique", nil, map[string]string{gpufabric.CliqueLabel: "a1b2c3d4-e5f6-7890-abcd-ef1234567890.1"})
	in := affinity(corev1.NodeSelectorOpIn)
	in.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{clique}
	pod("in-its-clique", in, nil)
	pod("plain", nil, nil)
	s.Sort()
	for name, want := range map[string]bool{"affinity": true, "selector": true, "pod-affinity": true, "in-its-clique": true,
		"avoids-cliques": false, "another-clique": false, "plain": false} {
		r, out := renderPod(t, s, "demo", name)
		line := "Clique:    node node-a left clique " + clique + ": every GPU's NVLink fabric is detached, so GPU Feature Discovery dropped nvidia.com/gpu.clique"
		summary := "the pod needs an NVLink clique and 1 node(s) left theirs (NVLink fabric detached): node-a"
		if got := strings.Contains(out, line) && strings.Contains(r.Summary, summary); got != want {
			t.Errorf("%s: clique named %v, want %v:\n%s", name, got, want, out)
		}
		if want && (len(r.LeftClique) != 1 || r.LeftClique[0] != (CliqueNode{Node: "node-a", Clique: clique})) {
			t.Errorf("%s: LeftClique %+v", name, r.LeftClique)
		}
	}
}
