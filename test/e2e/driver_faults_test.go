package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/gvr"
)

// TestPodDriverHealthFaults: on a pool with the nvidia-gpu profile, an injected XID 79 fault
// publishes the NVIDIA driver's taint gpu.nvidia.com/xid=79:NoSchedule on the pod's GPU; the
// running pod stays (NoSchedule never evicts), a new pod cannot get that GPU, an ignored XID
// (13, effect None) blocks nothing, explain and doctor say what the taint means, and clearing
// the fault (--mode healthy) removes the taint so the waiting pod runs.
func TestPodDriverHealthFaults(t *testing.T) {
	r := newPodRigWith(t, 2, nil, map[string]any{"profile": "nvidia-gpu"})
	e, ctx, ns := r.e, t.Context(), r.e.Namespace
	create := func(name string) {
		t.Helper()
		if _, err := e.Kube.CoreV1().Pods(ns).Create(ctx, r.gpuPod(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("victim")
	victim := r.claimOf(t, r.waitPod(t, "victim", 60*time.Second, podRunning))
	faulty := victim.Status.Allocation.Devices.Results[0].Device
	other := "gpu-0"
	if faulty == "gpu-0" {
		other = "gpu-1"
	}

	// taints returns the taints published on a device of the rig's node.
	taints := func(device string) []resourcev1.DeviceTaint {
		if d := r.device(t, device); d != nil {
			return d.Taints
		}
		return nil
	}
	waitTaint := func(device string, want []resourcev1.DeviceTaint) {
		t.Helper()
		eventually(t, 60*time.Second, func() (bool, string) {
			got := taints(device)
			ok := len(got) == len(want)
			for i := range want {
				ok = ok && got[i].Key == want[i].Key && got[i].Value == want[i].Value && got[i].Effect == want[i].Effect
			}
			return ok, fmt.Sprintf("%s taints %+v, want %+v", device, got, want)
		})
	}

	out := mustCLI(t, "inject-fault", "gpus", "-n", ns, "--device", faulty, "--node", r.node, "--mode", "xid", "--xid", "79")
	if !strings.Contains(out, "is xid (XID 79)") {
		t.Errorf("inject-fault said %q", out)
	}
	waitTaint(faulty, []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}})
	// NoSchedule does not evict: the pod using the GPU keeps running.
	time.Sleep(10 * time.Second)
	if p := r.waitPod(t, "victim", time.Second, podRunning); p.DeletionTimestamp != nil {
		t.Fatalf("victim is being deleted after a NoSchedule taint: %+v", p.Status)
	}

	// An XID the driver ignores is informational (effect None): the other GPU stays usable.
	mustCLI(t, "inject-fault", "gpus", "-n", ns, "--device", other, "--node", r.node, "--mode", "xid", "--xid", "13")
	waitTaint(other, []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "13", Effect: resourcev1.DeviceTaintEffectNone}})
	create("second")
	if got := r.claimOf(t, r.waitPod(t, "second", 60*time.Second, podRunning)).Status.Allocation.Devices.Results[0].Device; got != other {
		t.Fatalf("second got %s, want %s (the GPU with the ignored XID)", got, other)
	}

	// The faulty GPU freed: a new pod still cannot get it.
	if err := e.Kube.CoreV1().Pods(ns).Delete(ctx, "victim", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	r.waitClaimGone(t, victim.Name)
	create("third")
	r.waitPod(t, "third", 60*time.Second, unschedulableFor("cannot allocate all claims"))

	// explain names the taint and what it means; doctor warns about it.
	ex := runCLI(t, "explain", "-n", ns, "pod/third", "--devices")
	for _, want := range []string{
		"taint gpu.nvidia.com/xid=79:NoSchedule (published by the driver: NVIDIA driver health event: XID 79 (GPU has fallen off the bus), a critical error) is not tolerated",
		`key "gpu.nvidia.com/xid", effect NoSchedule`,
	} {
		if !strings.Contains(ex.stdout, want) {
			t.Errorf("explain lacks %q:\n%s\n%s", want, ex.stdout, ex.stderr)
		}
	}
	rep := doctorJSON(t, ns)
	i := slices.IndexFunc(rep.Results, func(r doctorResult) bool { return r.ID == "DRA012" })
	if i < 0 || rep.Results[i].Status != "WARN" || !slices.ContainsFunc(rep.Results[i].Evidence, func(ev string) bool {
		return strings.Contains(ev, "/"+r.node+"/"+faulty+": taint gpu.nvidia.com/xid=79:NoSchedule: NVIDIA driver health event: XID 79")
	}) {
		t.Errorf("doctor DRA012: %+v", rep.Results)
	}

	// Recovery: clearing the fault removes the taint (upstream, a restart of the kubelet
	// plugin does; dra-driver-nvidia-gpu #1455 tracks clearing it), and the waiting pod runs.
	mustCLI(t, "inject-fault", "gpus", "-n", ns, "--device", faulty, "--node", r.node, "--mode", "healthy")
	waitTaint(faulty, nil)
	r.waitPod(t, "third", 60*time.Second, podRunning)

	// A campaign hitting every device (fraction 1) sets an ecc fault on each, replacing their
	// faults on the node; a dry run writes nothing.
	dry := mustCLI(t, "fault-campaign", "gpus", "-n", ns, "--seed", "1", "--mode", "ecc", "--fraction", "1", "--dry-run")
	if !strings.Contains(dry, "has caused 2 faults by 0s (dry run") || !strings.Contains(dry, "node "+r.node+" device 1: ecc (XID 48)") {
		t.Errorf("dry run said %q", dry)
	}
	waitTaint(other, []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "13", Effect: resourcev1.DeviceTaintEffectNone}})
	mustCLI(t, "fault-campaign", "gpus", "-n", ns, "--seed", "1", "--mode", "ecc", "--fraction", "1")
	for _, d := range []string{"gpu-0", "gpu-1"} {
		waitTaint(d, []resourcev1.DeviceTaint{{Key: "gpu.nvidia.com/xid", Value: "48", Effect: resourcev1.DeviceTaintEffectNoSchedule}})
	}

	// spec.faultCampaigns: a gpu-lost campaign over every node taints every GPU of the node,
	// beside the listed faults' xid taints; removing faults and campaigns clears them all.
	patch := []byte(`{"spec":{"faultCampaigns":[{"seed":5,"mode":"gpu-lost","fraction":1}]}}`)
	if _, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(ns).Patch(ctx, "gpus", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"gpu-0", "gpu-1"} {
		waitTaint(d, []resourcev1.DeviceTaint{
			{Key: "gpu.nvidia.com/gpu-lost", Effect: resourcev1.DeviceTaintEffectNoSchedule},
			{Key: "gpu.nvidia.com/xid", Value: "48", Effect: resourcev1.DeviceTaintEffectNoSchedule}})
	}
	patch = []byte(`{"spec":{"faultCampaigns":null,"faults":null}}`)
	if _, err := e.Dynamic.Resource(gvr.SimulatedDevicePools).Namespace(ns).Patch(ctx, "gpus", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"gpu-0", "gpu-1"} {
		waitTaint(d, nil)
	}
}
