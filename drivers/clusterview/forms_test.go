package clusterview

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/draforge/draforge/drivers/allocationpod"
	"github.com/draforge/draforge/drivers/compactpod"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/machine"
)

// TestPrunedDeclaresWhatCachesKeep holds Pruned to the pruners themselves, with the machine
// loader as the judge: a machine reading every field of a full object loads without error for
// each field the cache keeps, and fails naming exactly the fields the pruner drops. A pruner
// that drops more than declared, or a declaration that allows a dropped field, fails here.
func TestPrunedDeclaresWhatCachesKeep(t *testing.T) {
	now := metav1.Now()
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 2,
			GenerateName: "p-", CreationTimestamp: now, DeletionTimestamp: &now, Finalizers: []string{"f"},
			Labels: map[string]string{allocationpod.Label: "claim-uid", "app": "x"}, Annotations: map[string]string{"example.io/a": "b"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "ju"}}},
		Spec: corev1.PodSpec{NodeName: "n", SchedulerName: "s", ServiceAccountName: "sa",
			InitContainers: []corev1.Container{{Name: "init", Image: "i"}},
			Containers: []corev1.Container{{Name: "c", Image: "img", Command: []string{"run"},
				Env:       []corev1.EnvVar{{Name: "E", Value: "v"}},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}, Limits: corev1.ResourceList{"cpu": resource.MustParse("1")}}}},
			ResourceClaims:  []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ref("t")}},
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ref("g")},
			Volumes:         []corev1.Volume{{Name: "v"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", HostIP: "172.16.0.1", StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Reason: "r", Message: "m"},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "c", Ready: true, Image: "img"}},
			ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ref("p-gpu")}}},
	}
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "nu", Labels: map[string]string{"example.io/sim": "true"}, Annotations: map[string]string{"a": "b"}},
		Spec:       corev1.NodeSpec{ProviderID: "p", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "1.2.3.4"}},
			Capacity:  corev1.ResourceList{"cpu": resource.MustParse("8")}, NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64"}},
	}
	full := func(o runtime.Object) map[string]any {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	typed := func(shrink func(runtime.Object) runtime.Object, o runtime.Object) map[string]any {
		out := shrink(o.DeepCopyObject())
		if c, ok := out.(engine.Compact); ok {
			out = c.ExpandObject()
		}
		return full(out)
	}
	for _, c := range []struct {
		name, resource, selector string
		cache                    machine.Cache
		in, out                  map[string]any
	}{
		{"pods, the pod machine's own", "pods", `selector: fields: "spec.nodeName!="`, machine.CacheSelected, full(pod), typed(MachinePod, pod)},
		{"pods, shared", "pods", "", machine.CacheShared, full(pod), typed(prunePod, pod)},
		{"nodes, the node machine's own", "nodes", `selector: labels: "example.io/sim": "true"`, machine.CacheSelected, full(node), typed(MachineNode, node)},
		{"nodes, shared", "nodes", "", machine.CacheShared, full(node), typed(pruneNode, node)},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, out := leaves(c.in, nil), leaves(c.out, nil)
			if len(out) == 0 || len(out) >= len(in) {
				t.Fatalf("the pruner kept %d of %d fields", len(out), len(in))
			}
			var dropped []string
			for _, p := range slices.Sorted(maps.Keys(in)) {
				if !out[p] {
					dropped = append(dropped, p)
				}
			}
			got := prunedReads(t, c.resource, c.selector, slices.Sorted(maps.Keys(in)))
			if !slices.Equal(got, dropped) {
				t.Errorf("the loader rejects reads of\n  %q\nthe pruner drops\n  %q", got, dropped)
			}
		})
	}
}

// leaves are the paths of every non-zero scalar of obj, lists
// transparent, list elements with a type selected by it ("status.conditions[type=Ready].status").
func leaves(obj any, prefix []string) map[string]bool {
	out := map[string]bool{}
	if obj == nil || obj == "" || obj == int64(0) { // zero values the converter writes for non-omitempty fields
		return out
	}
	switch v := obj.(type) {
	case map[string]any:
		for k, e := range v {
			step := k
			if strings.ContainsAny(k, `.[]"`) {
				step = `["` + k + `"]`
			}
			maps.Copy(out, leaves(e, append(slices.Clone(prefix), step)))
		}
	case []any:
		for _, e := range v {
			p := prefix
			if m, ok := e.(map[string]any); ok && m["type"] != nil && len(prefix) > 0 {
				p = append(slices.Clone(prefix[:len(prefix)-1]), fmt.Sprintf("%s[type=%s]", prefix[len(prefix)-1], m["type"]))
			}
			maps.Copy(out, leaves(e, p))
		}
	default:
		out[strings.ReplaceAll(strings.Join(prefix, "."), `.["`, `["`)] = true
	}
	return out
}

var readRE = regexp.MustCompile(`: reads (\S+) of `)

// prunedReads loads a machine over resource whose derive rules read each path, with the real
// drivers' names, and returns the paths the loader rejects as pruned, sorted.
func prunedReads(t *testing.T, resource, selector string, paths []string) []string {
	t.Helper()
	var rules []string
	for _, p := range paths {
		q, _ := json.Marshal(p)
		rules = append(rules, fmt.Sprintf("\t\t{state: \"a\", when: field: %s},", q))
	}
	src := fmt.Sprintf(`package machines

import "github.com/draforge/draforge/schemas"

machine: [string]: schemas.#Machine
machine: reader: {
	resource: {group: "", version: "v1", resource: %q}
	namespaced: true
	%s
	states: {a: {}, failed: terminal: true}
	initial: "a"
	terminalState: "failed"
	derive: [
%s
	]
}
`, resource, selector, strings.Join(rules, "\n"))
	reg := engine.NewRegistry()
	for _, p := range Pruned() {
		reg.Pruned(p)
	}
	names := reg.Names()
	_, err := machine.Load(fstest.MapFS{"r.cue": {Data: []byte(src)}}, names)
	var list machine.Errors
	if err != nil && !errors.As(err, &list) {
		t.Fatal(err)
	}
	var got []string
	for _, e := range list {
		m := readRE.FindStringSubmatch(e.Msg)
		if m == nil {
			t.Fatalf("not a pruned read: %v", e)
		}
		got = append(got, m[1])
	}
	slices.Sort(got)
	return slices.Compact(got)
}

func ref[T any](v T) *T { return &v }

// TestKubeConfig: the drivers' typed client asks for protobuf (JSON still accepted) and keeps
// everything else of the config, which stays as it was.
func TestKubeConfig(t *testing.T) {
	cfg := &rest.Config{Host: "https://example", QPS: 7, Burst: 9, UserAgent: "ua"}
	got := KubeConfig(cfg)
	if got.ContentType != runtime.ContentTypeProtobuf || got.AcceptContentTypes != runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON {
		t.Fatalf("content type %q, accept %q", got.ContentType, got.AcceptContentTypes)
	}
	if got.Host != cfg.Host || got.QPS != 7 || got.Burst != 9 || got.UserAgent != "ua" {
		t.Fatalf("config not kept: %+v", got)
	}
	if cfg.ContentType != "" || cfg.AcceptContentTypes != "" {
		t.Fatalf("the given config changed: %+v", cfg)
	}
}

// TestPrunePodKeepsSchedulerReasonWhileUnbound: the pod cache keeps kube-scheduler's
// PodScheduled condition of a pod it has not bound (explain and the serve views show why it
// waits) and drops it once the pod is bound.
func TestPrunePodKeepsSchedulerReasonWhileUnbound(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/2 nodes are available: 2 Insufficient cpu.", LastTransitionTime: metav1.Now()}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse}, unschedulable}}}
	c, ok := prunePod(pending).(*compactpod.Pod)
	if !ok || c.Scheduled == nil || c.Scheduled.Reason != "Unschedulable" || c.Scheduled.Message != unschedulable.Message {
		t.Fatalf("unbound pod: Scheduled %+v", c.Scheduled)
	}
	if got := c.Expand().Status.Conditions; len(got) != 1 || got[0].Type != corev1.PodScheduled {
		t.Errorf("expanded conditions %+v, want only PodScheduled", got)
	}
	bound := pending.DeepCopy()
	bound.Spec.NodeName = "node-a"
	bound.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	if c := prunePod(bound).(*compactpod.Pod); c.Scheduled != nil {
		t.Errorf("bound pod keeps %+v", c.Scheduled)
	}
}
