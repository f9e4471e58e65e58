// Package pods is the pod machine's driver: the facts outside a pod that the simulated kubelet
// (machines/pod.cue) needs, and its work on other objects. It tells whether a pod's node is
// simulated and its claims are allocated and reserved for it, prepares and unprepares those
// claims the way a DRA kubelet plugin does (status.devices through drivers/devicestatus, only
// for the pools whose driver reports device status), and
// reports each device's health as the kubelet's DRA manager writes it into
// containerStatuses[].allocatedResourcesStatus
// (k8s.io/kubernetes v1.37.2 pkg/kubelet/cm/dra/manager.go UpdateAllocatedResourcesStatus).
// The pod's own status (phase, conditions, container states) is written by the machine.
package pods

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/draforge/draforge/drivers/clusterview"
	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/devicestatus"
	"github.com/draforge/draforge/drivers/gvr"
	"github.com/draforge/draforge/drivers/podnamespaces"
	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/engine"
)

// Driver reads nodes, claims and slices from the shared informer caches.
type Driver struct {
	inf  *engine.Informers
	kube kubernetes.Interface
	// PodNamespaces are where the simulated kubelet may write pods (--pod-namespaces).
	PodNamespaces podnamespaces.Set

	// pools are the cluster view's decoded SimulatedDevicePools: whether a pool's simulated
	// driver writes status.devices (simdevice.PoolSpec.ReportsDeviceStatus).
	pools *clusterview.Pools

	// PrepareWaits are simulated drivers' reasons not to prepare a reserved claim on a node yet,
	// as a DRA plugin's NodePrepareResources keeps failing until its own preconditions hold (the
	// kubelet retries); "" lets it through. The pod stays pending with the reason.
	PrepareWaits []func(node string, claim *resourcev1.ResourceClaim) string
}

// Register registers the pod machine's observations and actions; pools is the cluster view's
// pool index.
func Register(reg *engine.Registry, inf *engine.Informers, kube kubernetes.Interface, pools *clusterview.Pools) (*Driver, error) {
	d := &Driver{inf: inf, kube: kube, pools: pools}
	// The caches read below (claims are the claim machine's own informer).
	inf.For(gvr.Nodes)
	inf.For(gvr.ResourceSlices)
	// slicePods runs on every slice event: it finds the claims holding a pool's devices by
	// index, not by decoding every cached claim.
	if err := inf.For(gvr.ResourceClaims).AddIndexers(cache.Indexers{byReservedPool: reservedPools}); err != nil {
		return nil, err
	}
	// A pod's device health is looked up per device on every pass of a running pod: by pool,
	// not by scanning every cached slice.
	if err := inf.For(gvr.ResourceSlices).AddIndexers(cache.Indexers{bySlicePool: slicePool}); err != nil {
		return nil, err
	}
	reg.Observation("podOnSimulatedNode", d.onSimulatedNode)
	reg.Observation("podClaimsReserved", d.claimsReserved)
	reg.Observation("podDeviceHealth", d.deviceHealth)
	reg.Observation("podDeviceHealthChanged", d.deviceHealthChanged)
	reg.Observation("podNetwork", d.network)
	reg.Action("prepareClaims", d.prepare)
	reg.Action("unprepareClaims", d.unprepare)
	reg.Mapper("claimPods", ClaimPods)
	reg.Mapper("slicePods", d.slicePods)
	return d, nil
}

// reports tells whether the simulated driver of a DRA pool writes status.devices: the pool's
// slices name the SimulatedDevicePool that publishes them (DRA pool names may be hashed).
func (d *Driver) reports(driver string) devicestatus.Reports {
	return func(pool, _ string) bool {
		objs, _ := d.inf.For(gvr.ResourceSlices).GetIndexer().ByIndex(bySlicePool, driver+"/"+pool)
		for _, o := range objs {
			if s, ok := o.(*compactslice.Slice); ok {
				l := s.GetLabels()
				p, ok := d.pools.Get(l[simdevice.LabelSDPNamespace] + "/" + l[simdevice.LabelSDPName])
				return ok && p.Spec.ReportsDeviceStatus()
			}
		}
		return false
	}
}

// ClaimPods maps a claim to the pods it is reserved for. It runs on every claim event, so it
// reads status.reservedFor of the cached (unstructured) claim without converting it.
func ClaimPods(obj metav1.Object) []cache.ObjectName {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	var out []cache.ObjectName
	for _, r := range nestedMaps(u.Object, "status", "reservedFor") {
		if r["resource"] == "pods" && (r["apiGroup"] == nil || r["apiGroup"] == "") {
			if name, _ := r["name"].(string); name != "" {
				out = append(out, cache.ObjectName{Namespace: u.GetNamespace(), Name: name})
			}
		}
	}
	return out
}

// byReservedPool indexes claims that are allocated and reserved by the driver/pool of each
// allocated device.
const byReservedPool = "reservedPool"

// reservedPools is the byReservedPool index function (claims are cached unstructured).
func reservedPools(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || len(nestedMaps(u.Object, "status", "reservedFor")) == 0 {
		return nil, nil
	}
	var keys []string
	for _, r := range nestedMaps(u.Object, "status", "allocation", "devices", "results") {
		driver, _ := r["driver"].(string)
		pool, _ := r["pool"].(string)
		keys = append(keys, driver+"/"+pool)
	}
	return keys, nil
}

// bySlicePool indexes slices by "<driver>/<pool>".
const bySlicePool = "pods/slice-pool"

func slicePool(obj any) ([]string, error) {
	s, ok := obj.(*compactslice.Slice)
	if !ok {
		return nil, nil
	}
	return []string{s.Driver() + "/" + s.Pool().Name}, nil
}

// nestedMaps returns the objects of the list at path, without copying (nil when absent).
func nestedMaps(obj map[string]any, path ...string) []map[string]any {
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, path...)
	list, _ := v.([]any)
	if !ok || len(list) == 0 {
		return nil
	}
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// slicePods maps a slice to the pods holding one of its pool's devices (a fault changed their
// health).
func (d *Driver) slicePods(obj metav1.Object) []cache.ObjectName {
	s, ok := obj.(*compactslice.Slice)
	if !ok {
		return nil
	}
	claims, _ := d.inf.For(gvr.ResourceClaims).GetIndexer().ByIndex(byReservedPool, s.Driver()+"/"+s.Pool().Name)
	var out []cache.ObjectName
	for _, o := range claims {
		if m, ok := o.(metav1.Object); ok {
			out = append(out, ClaimPods(m)...)
		}
	}
	return out
}

// typedPod returns the pass's pod as the API type: the shared cache's own pod when the pass
// has it (the controller caches the pod machine's pods typed, see clusterview.MachinePod),
// else only the fields this driver reads (see podFields), converted once per pass. Callers
// must not change it.
func typedPod(ctx context.Context, obj *unstructured.Unstructured) (*corev1.Pod, error) {
	if p, ok := engine.PassCached[corev1.Pod](ctx); ok {
		return p, nil
	}
	return engine.PassValue(ctx, passPodKey{}, func() (*corev1.Pod, error) { return podFields(obj) })
}

type passPodKey struct{}

// podFields converts what the driver reads of a pod: its identity, spec.schedulingGroup,
// spec.resourceClaims, each
// container's name and claim references, status.resourceClaimStatuses and
// extendedResourceClaimStatus, and each container status's name and allocatedResourcesStatus.
// Converting the whole pod (conditions, container states and their timestamps) was a quarter
// of the pod machine's CPU.
func podFields(obj *unstructured.Unstructured) (*corev1.Pod, error) {
	if k := obj.GetKind(); k != "" && k != "Pod" {
		return nil, fmt.Errorf("not a Pod: %s", obj.GetKind())
	}
	spec, _ := obj.Object["spec"].(map[string]any)
	status, _ := obj.Object["status"].(map[string]any)
	part := map[string]any{
		"spec": map[string]any{
			"schedulingGroup": spec["schedulingGroup"],
			"resourceClaims":  spec["resourceClaims"],
			"containers":      only(spec["containers"], "name", "resources.claims"),
		},
		"status": map[string]any{
			"resourceClaimStatuses":       status["resourceClaimStatuses"],
			"extendedResourceClaimStatus": status["extendedResourceClaimStatus"],
			"containerStatuses":           only(status["containerStatuses"], "name", "allocatedResourcesStatus"),
		},
	}
	pod := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(part, pod); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	pod.Name, pod.Namespace, pod.UID = obj.GetName(), obj.GetNamespace(), obj.GetUID()
	return pod, nil
}

// only keeps of each object of list the fields named (a "parent.child" keeps one field of a
// nested object); a list that is not one is nil.
func only(list any, fields ...string) []any {
	items, _ := list.([]any)
	if items == nil {
		return nil
	}
	out := make([]any, 0, len(items))
	for _, it := range items {
		m, _ := it.(map[string]any)
		kept := map[string]any{}
		for _, f := range fields {
			parent, child, nested := strings.Cut(f, ".")
			v, ok := m[parent]
			if !ok {
				continue
			}
			if nested {
				sub, _ := v.(map[string]any)
				if c, ok := sub[child]; ok {
					kept[parent] = map[string]any{child: c}
				}
				continue
			}
			kept[parent] = v
		}
		out = append(out, kept)
	}
	return out
}

func (d *Driver) onSimulatedNode(_ context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	n, _, _ := unstructured.NestedString(obj.Object, "spec", "nodeName")
	if n == "" {
		return engine.Fact{Message: "the pod is not bound to a node"}, nil
	}
	o, ok, err := d.inf.For(gvr.Nodes).GetStore().GetByKey(n)
	if err != nil || !ok {
		return engine.Fact{Message: "node " + n + " is not known"}, err
	}
	meta := engine.ObjectMeta(o)
	if meta == nil || meta.GetLabels()[simnode.LabelSimulated] != simnode.LabelSimulatedValue {
		return engine.Fact{Message: "node " + n + " is not simulated"}, nil
	}
	// A pod on a simulated node nobody else runs: say why it stays as it is.
	if err := d.PodNamespaces.Check(obj.GetNamespace(), "the simulated kubelet of node "+n+" cannot write this pod"); err != nil {
		return engine.Fact{}, err
	}
	return engine.Holds(true), nil
}

// podClaim is one of the pod's claims, resolved to its ResourceClaim (nil when not created yet).
type podClaim struct {
	podName   string // the name in pod.spec.resourceClaims
	claimName string
	claim     *resourcev1.ResourceClaim
}

// passClaims is d.claims of the pass's pod, resolved once per pass: a running pod's pass reads
// them for its readiness, its devices' health and its health change, each of which would
// otherwise convert every claim from the cache again.
func (d *Driver) passClaims(ctx context.Context, pod *corev1.Pod) ([]podClaim, string) {
	r, _ := engine.PassValue(ctx, passClaimsKey{}, func() (resolvedClaims, error) {
		claims, why := d.claims(pod)
		return resolvedClaims{claims, why}, nil
	})
	return r.claims, r.why
}

type passClaimsKey struct{}

type resolvedClaims struct {
	claims []podClaim
	why    string
}

// claims resolves the pod's claims as the kubelet does: a ResourceClaimName or the generated
// name from status.resourceClaimStatuses; a template claim whose status entry has a nil name
// needs no claim (kube-controller-manager decided so, e.g. for an extended resource).
func (d *Driver) claims(pod *corev1.Pod) ([]podClaim, string) {
	var out []podClaim
	for _, rc := range pod.Spec.ResourceClaims {
		name := ""
		if rc.ResourceClaimName != nil {
			name = *rc.ResourceClaimName
		} else {
			found := false
			for _, st := range pod.Status.ResourceClaimStatuses {
				if st.Name == rc.Name {
					found = true
					if st.ResourceClaimName != nil {
						name = *st.ResourceClaimName
					}
				}
			}
			if !found {
				return nil, "claim " + rc.Name + " has no generated ResourceClaim yet"
			}
			if name == "" {
				continue
			}
		}
		pc := podClaim{podName: rc.Name, claimName: name}
		if o, ok, _ := d.inf.For(gvr.ResourceClaims).GetStore().GetByKey(pod.Namespace + "/" + name); ok {
			pc.claim = claimStatus(o)
		}
		out = append(out, pc)
	}
	// An extended resource backed by DRA: the scheduler creates a claim for the pod and
	// records it in status.extendedResourceClaimStatus.
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil && st.ResourceClaimName != "" {
		pc := podClaim{podName: "", claimName: st.ResourceClaimName}
		if o, ok, _ := d.inf.For(gvr.ResourceClaims).GetStore().GetByKey(pod.Namespace + "/" + st.ResourceClaimName); ok {
			pc.claim = claimStatus(o)
		}
		out = append(out, pc)
	}
	return out, ""
}

// claimStatus converts what the driver reads of a cached claim: its identity and its status
// (allocation, reservedFor, devices). The spec and the rest of the metadata are left out: the
// claim is converted on every pass of each of its pods. nil when o is not a claim.
func claimStatus(o any) *resourcev1.ResourceClaim {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		c, _ := engine.Typed[resourcev1.ResourceClaim](o)
		return c
	}
	c := &resourcev1.ResourceClaim{}
	if st, ok := u.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st, &c.Status); err != nil {
			return nil
		}
	}
	c.Name, c.Namespace, c.UID, c.ResourceVersion = u.GetName(), u.GetNamespace(), u.GetUID(), u.GetResourceVersion()
	return c
}

// claimsReserved holds when every claim of the pod exists, is allocated and lists the pod in
// reservedFor, or the pod's PodGroup (spec.schedulingGroup.podGroupName): what the kubelet
// checks before it prepares (pkg/kubelet/cm/dra/manager.go, resourceclaim.IsReservedForPod).
// The simulated kubelet accepts a PodGroup's reservation as a kubelet with
// DRAWorkloadResourceClaims on does; with the gate off kube-scheduler never makes one.
func (d *Driver) claimsReserved(ctx context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	pod, err := typedPod(ctx, obj)
	if err != nil {
		return engine.Fact{}, err
	}
	claims, why := d.passClaims(ctx, pod)
	if why != "" {
		return engine.Fact{Message: why}, nil
	}
	for _, c := range claims {
		switch {
		case c.claim == nil:
			return engine.Fact{Message: "ResourceClaim " + c.claimName + " does not exist"}, nil
		case c.claim.Status.Allocation == nil:
			return engine.Fact{Message: "ResourceClaim " + c.claimName + " is not allocated"}, nil
		case !resourceclaim.IsReservedForPod(pod, c.claim, true):
			return engine.Fact{Message: "ResourceClaim " + c.claimName + " is not reserved for the pod"}, nil
		}
		if len(d.PrepareWaits) > 0 {
			node, _, _ := unstructured.NestedString(obj.Object, "spec", "nodeName")
			for _, wait := range d.PrepareWaits {
				if why := wait(node, c.claim); why != "" {
					return engine.Fact{Message: "ResourceClaim " + c.claimName + ": " + why}, nil
				}
			}
		}
	}
	return engine.Holds(true), nil
}

// prepare writes status.devices of every claim, as the node's DRA plugins that report device
// status do in NodePrepareResources (most do not, see simdevice.PoolSpec.ReportsDeviceStatus):
// an UpdateStatus of the cached claim (devicestatus.Update), so a cache behind the claim is a
// Conflict; the claim's watch event then starts the pod's next pass.
func (d *Driver) prepare(ctx context.Context, obj *unstructured.Unstructured) error {
	pod, err := typedPod(ctx, obj)
	if err != nil {
		return err
	}
	claims, _ := d.passClaims(ctx, pod)
	now := metav1.Now()
	for _, c := range claims {
		if c.claim == nil || c.claim.Status.Allocation == nil {
			continue
		}
		for _, driver := range drivers(c.claim) {
			entries := devicestatus.Entries(c.claim, driver, d.reports(driver), network, now)
			if err := d.updateDevices(ctx, c, driver, entries); isGone(err) {
				// Deleted or replaced since the cache saw it: wait for the new one.
				return engine.Pending("ClaimGone", err.Error(), time.Second)
			} else if apierrors.IsConflict(err) {
				return engine.Pending("ClaimChanged", err.Error(), time.Second)
			} else if err != nil {
				return err
			}
		}
	}
	return nil
}

// updateDevices makes driver's status.devices entries of the pod's claim equal to entries
// (devicestatus.Update). The pass holds the claim's identity and status only (claimStatus);
// the update sends the whole claim, so it is converted from the cache in full, and only when
// there is something to write.
func (d *Driver) updateDevices(ctx context.Context, c podClaim, driver string, entries []resourcev1.AllocatedDeviceStatus) error {
	if devicestatus.Unchanged(c.claim, driver, entries) {
		return nil
	}
	o, ok, _ := d.inf.For(gvr.ResourceClaims).GetStore().GetByKey(c.claim.Namespace + "/" + c.claim.Name)
	full, typed := engine.Typed[resourcev1.ResourceClaim](o)
	if !ok || !typed || full.UID != c.claim.UID {
		return apierrors.NewNotFound(gvr.ResourceClaims.GroupResource(), c.claim.Name)
	}
	return devicestatus.Update(ctx, d.kube.ResourceV1(), full, driver, entries)
}

// unprepare removes what prepare wrote (NodeUnprepareResources). A claim already gone or
// deallocated has nothing left to clear.
func (d *Driver) unprepare(ctx context.Context, obj *unstructured.Unstructured) error {
	pod, err := typedPod(ctx, obj)
	if err != nil {
		return err
	}
	claims, _ := d.passClaims(ctx, pod)
	for _, c := range claims {
		if c.claim == nil {
			continue
		}
		seen := map[string]bool{}
		for _, s := range c.claim.Status.Devices {
			if seen[s.Driver] {
				continue
			}
			seen[s.Driver] = true
			err := d.updateDevices(ctx, c, s.Driver, nil)
			if apierrors.IsConflict(err) {
				return engine.Pending("ClaimChanged", err.Error(), time.Second)
			}
			if err != nil && !isGone(err) {
				return err
			}
		}
	}
	return nil
}

// isGone: the claim was deleted (or re-created under another UID) since the cache saw it.
func isGone(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsInvalid(err) }

func drivers(claim *resourcev1.ResourceClaim) []string {
	var out []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if !slices.Contains(out, r.Driver) {
			out = append(out, r.Driver)
		}
	}
	return out
}

// network gives NIC-like devices ("nic-<i>", the mellanox-nic profile's and any pool of
// deviceType nic) the simulated interface the kubelet plugin reports too.
func network(pool, device string) *resourcev1.NetworkDeviceData {
	rest, ok := strings.CutPrefix(device, "nic-")
	if !ok {
		return nil
	}
	var i int
	if _, err := fmt.Sscanf(rest, "%d", &i); err != nil {
		return nil
	}
	return devicestatus.SimulatedNetwork(pool+"/"+device, fmt.Sprintf("nic%d", i))
}

// Health is the allocatedResourcesStatus of each container, by container name.
type Health map[string][]corev1.ResourceStatus

// health computes the kubelet's allocatedResourcesStatus: per container and claim reference a
// "claim:<name>[/<request>]" entry listing the claim's devices (of that request) as
// "<driver>/<pool>/<device>" with their health: Unhealthy when the device carries the
// unhealthy fault's taint, Unknown when its slice no longer offers it, else Healthy.
func (d *Driver) health(ctx context.Context, pod *corev1.Pod) Health {
	claims, _ := d.passClaims(ctx, pod)
	byName := map[string]*resourcev1.ResourceClaim{}
	for _, c := range claims {
		if c.claim != nil && c.claim.Status.Allocation != nil {
			byName[c.podName] = c.claim
		}
	}
	out := Health{}
	for _, ctr := range pod.Spec.Containers {
		var statuses []corev1.ResourceStatus
		for _, ref := range ctr.Resources.Claims {
			claim := byName[ref.Name]
			if claim == nil {
				continue
			}
			name := "claim:" + ref.Name
			if ref.Request != "" {
				name += "/" + ref.Request
			}
			st := corev1.ResourceStatus{Name: corev1.ResourceName(name)}
			for _, r := range claim.Status.Allocation.Devices.Results {
				if ref.Request != "" && baseRequest(r.Request) != ref.Request {
					continue
				}
				id := corev1.ResourceID(r.Driver + "/" + r.Pool + "/" + r.Device)
				if slices.ContainsFunc(st.Resources, func(h corev1.ResourceHealth) bool { return h.ResourceID == id }) {
					continue
				}
				st.Resources = append(st.Resources, corev1.ResourceHealth{ResourceID: id, Health: d.deviceHealthOf(r.Driver, r.Pool, r.Device)})
			}
			if len(st.Resources) > 0 {
				statuses = append(statuses, st)
			}
		}
		if len(statuses) > 0 {
			out[ctr.Name] = statuses
		}
	}
	return out
}

func baseRequest(r string) string {
	base, _, _ := strings.Cut(r, "/")
	return base
}

func (d *Driver) deviceHealthOf(driver, pool, device string) corev1.ResourceHealthStatus {
	objs, _ := d.inf.For(gvr.ResourceSlices).GetIndexer().ByIndex(bySlicePool, driver+"/"+pool)
	for _, o := range objs {
		s, ok := o.(*compactslice.Slice)
		if !ok {
			continue
		}
		for i := range s.Len() {
			if s.DeviceName(i) != device {
				continue
			}
			if slices.ContainsFunc(s.Taints(i), simdevice.ReportsUnhealthy) {
				return corev1.ResourceHealthStatusUnhealthy
			}
			return corev1.ResourceHealthStatusHealthy
		}
	}
	return corev1.ResourceHealthStatusUnknown
}

// deviceHealth's value is the pod's Health, for the machine's containerStatuses template.
func (d *Driver) deviceHealth(ctx context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	pod, err := typedPod(ctx, obj)
	if err != nil {
		return engine.Fact{}, err
	}
	return engine.Fact{Holds: true, Value: d.health(ctx, pod)}, nil
}

// deviceHealthChanged holds when a running container's allocatedResourcesStatus differs from
// the devices' health now (the kubelet updates the pod status on a health change).
func (d *Driver) deviceHealthChanged(ctx context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	pod, err := typedPod(ctx, obj)
	if err != nil {
		return engine.Fact{}, err
	}
	want := d.health(ctx, pod)
	for _, cs := range pod.Status.ContainerStatuses {
		if !equalStatuses(cs.AllocatedResourcesStatus, want[cs.Name]) {
			return engine.Fact{Holds: true, Message: "the health of container " + cs.Name + "'s devices changed"}, nil
		}
	}
	return engine.Fact{}, nil
}

func equalStatuses(a, b []corev1.ResourceStatus) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ResourceStatus) bool {
		return x.Name == y.Name && slices.EqualFunc(x.Resources, y.Resources, func(p, q corev1.ResourceHealth) bool {
			return p.ResourceID == q.ResourceID && p.Health == q.Health
		})
	})
}

// Network is a pod's address and its host's, the value of the podNetwork observation.
type Network struct {
	HostIP string `json:"hostIP"`
	PodIP  string `json:"podIP"`
}

// network's value is the pod's Network: simulated nodes have no address, so both are derived
// from names (stable across restarts): the host from 172.16.0.0/12 by node name, the pod from
// 10.244.0.0/16 by pod UID.
func (d *Driver) network(_ context.Context, obj *unstructured.Unstructured) (engine.Fact, error) {
	node, _, _ := unstructured.NestedString(obj.Object, "spec", "nodeName")
	return engine.Fact{Holds: true, Value: Network{
		HostIP: addr(node, [4]byte{172, 16, 0, 0}, 12),
		PodIP:  PodIP(string(obj.GetUID())),
	}}, nil
}

// PodIP is the address the simulated network gives the pod (or daemon) of seed.
func PodIP(seed string) string { return addr(seed, [4]byte{10, 244, 0, 0}, 16) }

func addr(seed string, base [4]byte, bits int) string {
	h := sha256.Sum256([]byte(seed))
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	host := (uint32(h[0])<<24 | uint32(h[1])<<16 | uint32(h[2])<<8 | uint32(h[3])) & (1<<(32-bits) - 1)
	if host == 0 || host == 1<<(32-bits)-1 {
		host = 1
	}
	v |= host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}
