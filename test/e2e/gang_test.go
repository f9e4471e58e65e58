package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/replay"
	"github.com/draforge/draforge/test/cluster"
	"github.com/draforge/draforge/test/e2e/e2eutil"
)

// TestScenariosDRAAll runs the example scenarios that need the dra-all profile (gangs:
// PodGroups and their claims) on a control plane of their own with that profile, the real
// kube-scheduler and kube-controller-manager, and a controller.
func TestScenariosDRAAll(t *testing.T) {
	e := runProfileScenarios(t, "dra-all", func(c *cluster.Cluster) {
		// draforge serve (the dashboard and the TUI read the same snapshot) shows the gangs too.
		gangServe = e2eutil.Run(t, e2eutil.ControllerSpec{Kubeconfig: c.Kubeconfig, Subcommand: "serve", AddrFlag: "--address"})
		t.Cleanup(func() { gangServe = nil })
	})
	// A trace of gangs, replayed: pair (2 × 4 GPUs, all or none) waits as one group for wide
	// (3 × 4, every GPU) to end.
	r := replayOn(t, e, "examples/traces/gangs.yaml")
	s := replay.Summarize(r)
	pair, _ := r.Jobs[1].Wait()
	if s.Finished != 3 || s.Gang.N != 2 || r.Jobs[1].Name != "pair" || pair < 40*time.Second {
		t.Errorf("gangs replayed: pair waited %s (want about 50s), summary %+v", pair, s)
	}
}

// replayOn replays trace at 60x on e's cluster after applying the cluster it runs on
// (examples/traces/small-cluster.yaml and, for queues, queues-cluster.yaml), and reads its record.
func replayOn(t *testing.T, e *env, trace string, clusterFiles ...string) *replay.Record {
	t.Helper()
	applyTraceCluster(t, e, clusterFiles...)
	return replayedAt(t, e.Kubeconfig, trace, "60", filepath.Join(t.TempDir(), "replay"))
}

// runProfileScenarios runs the example scenarios marked "# profile: PROFILE" on a control plane
// of their own with that profile, the real kube-scheduler and kube-controller-manager, and a
// controller; before runs, when not nil, once the controller is up.
func runProfileScenarios(t *testing.T, profile string, before func(*cluster.Cluster)) *env {
	if testing.Short() {
		t.Skip("starts its own control plane")
	}
	if e2eutil.ExistingCluster(os.Getenv) != "" {
		t.Skip("needs a control plane with the " + profile + " profile")
	}
	files := scenarioFiles(t, profile)
	if len(files) == 0 {
		t.Fatalf("no example scenario needs the %s profile", profile)
	}
	c, err := cluster.Start(t.Context(), cluster.Options{Dir: t.TempDir(), Log: os.Stderr, Extra: cluster.Workloads, Profile: profile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	e := &env{e2eutil.NewEnv(t, c.Kubeconfig)}
	e.Setup(t)
	ctrl := e2eutil.StartController(t, c.Kubeconfig)
	if before != nil {
		before(c)
	}
	runScenarios(t, e, ctrl, files)
	return e
}

// gangServe is the draforge serve TestScenariosDRAAll runs, nil elsewhere.
var gangServe *controller

// checkPodGroup waits for a PodGroup's outcome (see workloadLine).
func (e *env) checkPodGroup(t *testing.T, ns, name, state, count string) {
	t.Helper()
	ctx := t.Context()
	members := func() ([]corev1.Pod, error) {
		pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
			return p.Spec.SchedulingGroup == nil || ptr.Deref(p.Spec.SchedulingGroup.PodGroupName, "") != name
		}), nil
	}
	groups := e.Kube.SchedulingV1beta1().PodGroups(ns)
	switch state {
	case "running", "pending":
		n, err := strconv.Atoi(count)
		if err != nil {
			t.Fatalf("podgroup %s %s: count %q", name, state, count)
		}
		eventually(t, 60*time.Second, func() (bool, string) {
			pods, err := members()
			if err != nil {
				return false, err.Error()
			}
			if len(pods) != n {
				return false, fmt.Sprintf("podgroup %s: %d pods, want %d", name, len(pods), n)
			}
			for i := range pods {
				if state == "running" {
					if ok, why := podRunning(&pods[i]); !ok {
						return false, "podgroup " + name + ": " + why
					}
				} else if !unschedulable(&pods[i]) {
					return false, fmt.Sprintf("podgroup %s: pod %s on %q conditions %+v", name, pods[i].Name, pods[i].Spec.NodeName, pods[i].Status.Conditions)
				}
			}
			if state == "pending" {
				return true, ""
			}
			// The group's own claims are allocated and reserved for the group, not its pods.
			g, err := groups.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if len(g.Status.ResourceClaimStatuses) != len(g.Spec.ResourceClaims) {
				return false, fmt.Sprintf("podgroup %s: claim statuses %+v", name, g.Status.ResourceClaimStatuses)
			}
			for _, s := range g.Status.ResourceClaimStatuses {
				claim, err := e.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, ptr.Deref(s.ResourceClaimName, ""), metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				reserved := slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool {
					return r.APIGroup == schedulingv1beta1.GroupName && r.Resource == "podgroups" && r.Name == name && r.UID == g.UID
				})
				if claim.Status.Allocation == nil || !reserved || len(claim.Status.ReservedFor) != 1 {
					return false, fmt.Sprintf("podgroup %s: claim %s allocated %v reservedFor %+v", name, claim.Name, claim.Status.Allocation != nil, claim.Status.ReservedFor)
				}
			}
			return true, ""
		})
		if state == "running" {
			e.checkTopology(t, ns, name, members)
		}
		if state == "pending" {
			// All or nothing: none is placed a while later either.
			time.Sleep(2 * time.Second)
			pods, err := members()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods {
				if p.Spec.NodeName != "" {
					t.Errorf("podgroup %s: pod %s placed on %s", name, p.Name, p.Spec.NodeName)
				}
			}
		}
		// explain shows the gang beside the scheduler's verdict on the pod.
		out := mustCLI(t, "--kubeconfig", e.Kubeconfig, "explain", "pod/"+pods0(t, members), "-n", ns)
		placed := "0 placed"
		if state == "running" {
			placed = count + " placed"
		}
		for _, want := range []string{"Gang:      PodGroup " + name + " (gang, minCount ", "  Members: " + count + " pods, " + placed, "  Scheduled: "} {
			if !strings.Contains(out, want) {
				t.Errorf("explain of a member of %s lacks %q:\n%s", name, want, out)
			}
		}
		if gangServe != nil {
			// The dashboard's explain of the pod (serve's snapshot, from its informers).
			path := "/api/explain/pod/" + ns + "/" + pods0(t, members)
			eventually(t, 30*time.Second, func() (bool, string) {
				code, body := gangServe.Get(path)
				ok := code == 200 && strings.Contains(body, `"podGroup": "`+name+`"`) && strings.Contains(body, `"minCount": `) &&
					strings.Contains(body, `"placed": `+map[bool]string{true: count, false: "0"}[state == "running"])
				return ok, fmt.Sprintf("serve %s: %d %s", path, code, body)
			})
		}
	case "ends":
		g, err := groups.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods, err := members()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if err := e.Kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := groups.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, func() (bool, string) {
			if _, err := groups.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("podgroup %s not gone: %v", name, err)
			}
			for _, s := range g.Status.ResourceClaimStatuses {
				_, err := e.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, ptr.Deref(s.ResourceClaimName, ""), metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					return false, fmt.Sprintf("podgroup %s: claim %s not gone: %v", name, ptr.Deref(s.ResourceClaimName, ""), err)
				}
			}
			return true, ""
		})
		if len(g.Status.ResourceClaimStatuses) == 0 {
			t.Errorf("podgroup %s had no claim to free", name)
		}
	}
}

// pods0 is the name of the first member pod members returns.
func pods0(t *testing.T, members func() ([]corev1.Pod, error)) string {
	t.Helper()
	pods, err := members()
	if err != nil || len(pods) == 0 {
		t.Fatalf("no member pod: %v", err)
	}
	return pods[0].Name
}

// checkTopology: the pods of a PodGroup with a topology constraint all run on nodes of one
// domain of its key (one rack, say).
func (e *env) checkTopology(t *testing.T, ns, name string, members func() ([]corev1.Pod, error)) {
	t.Helper()
	g, err := e.Kube.SchedulingV1beta1().PodGroups(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Spec.SchedulingConstraints == nil || len(g.Spec.SchedulingConstraints.Topology) == 0 {
		return
	}
	key := g.Spec.SchedulingConstraints.Topology[0].Key
	pods, err := members()
	if err != nil {
		t.Fatal(err)
	}
	domains := map[string][]string{}
	for _, p := range pods {
		n, err := e.Kube.CoreV1().Nodes().Get(t.Context(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := n.Labels[key]
		if !ok {
			t.Errorf("podgroup %s: pod %s on node %s without label %s", name, p.Name, n.Name, key)
		}
		domains[v] = append(domains[v], p.Name+"@"+n.Name)
	}
	if len(domains) != 1 {
		t.Errorf("podgroup %s: pods in %d domains of %s, want one: %v", name, len(domains), key, domains)
	}
}
