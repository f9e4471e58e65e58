// Package doctor runs diagnostic checks over a Snapshot and a few facts about the API server
// (Facts). Every check has a stable ID and yields PASS, WARN, FAIL or SKIP with evidence and a
// remediation. The checks are pure; Gather (gather.go) collects Facts from a live cluster.
package doctor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/devicehealth"
	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/simdevice"
)

// Status of a check.
type Status string

// Statuses, from best to worst (SKIP aside).
const (
	Pass Status = "PASS"
	Warn Status = "WARN"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Stable check IDs.
const (
	IDResourceAPI      = "DRA001"
	IDServerVersion    = "DRA002"
	IDCRD              = "DRA003"
	IDController       = "DRA004"
	IDClassCEL         = "DRA005"
	IDPoolConsistency  = "DRA006"
	IDDuplicateDevices = "DRA007"
	IDOrphanedClaims   = "DRA008"
	IDSliceNodes       = "DRA009"
	IDPodClaimRefs     = "DRA010"
	IDFeatures         = "DRA011"
	IDHealthTaints     = "DRA012"
	IDNodeAllocatable  = "DRA013"
	IDNVLinkCliques    = "DRA014"
)

// MinServerVersion is the oldest Kubernetes version that serves resource.k8s.io/v1 with the
// features DRAForge uses.
var MinServerVersion = utilversion.MustParseGeneric("1.34.0")

// Result is the outcome of one check.
type Result struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Status      Status   `json:"status"`
	Message     string   `json:"message"`
	Evidence    []string `json:"evidence,omitempty"`
	Remediation string   `json:"remediation,omitempty"`
}

// Report is every check's result, in ID order, with a count per status.
type Report struct {
	Summary map[Status]int `json:"summary"`
	Results []Result       `json:"results"`
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool { return r.Summary[Fail] > 0 }

// Facts are what the checks need beyond the Snapshot. A nil field means "not collected" and
// makes the corresponding check SKIP.
type Facts struct {
	// ResourceAPI is discovery of resource.k8s.io.
	ResourceAPI *APIFacts `json:"resourceAPI,omitempty"`
	// ServerVersion is the gitVersion from /version, e.g. "v1.37.2"; VersionError is set when
	// it could not be read.
	ServerVersion string `json:"serverVersion,omitempty"`
	VersionError  string `json:"versionError,omitempty"`
	// CRD is the SimulatedDevicePool CustomResourceDefinition.
	CRD *CRDFacts `json:"crd,omitempty"`
	// Controller is the result of probing the controller's /readyz.
	Controller *ControllerFacts `json:"controller,omitempty"`
	// Features are the cluster's DRA and workload-scheduling gates and API versions.
	Features *FeatureFacts `json:"features,omitempty"`
	// SnapshotError is set when the cluster state could not be read; data checks then SKIP.
	SnapshotError string `json:"snapshotError,omitempty"`
}

// APIFacts is discovery of the resource.k8s.io group.
type APIFacts struct {
	// Versions are the served versions of resource.k8s.io ("v1", "v1beta2", …).
	Versions []string `json:"versions"`
	// V1Resources are the resources served by resource.k8s.io/v1.
	V1Resources []string `json:"v1Resources"`
	Error       string   `json:"error,omitempty"`
}

// CRDFacts describes the SimulatedDevicePool CRD.
type CRDFacts struct {
	Name        string `json:"name"`
	Found       bool   `json:"found"`
	Established bool   `json:"established"`
	// EstablishedMessage is the Established condition's reason and message when not True.
	EstablishedMessage string   `json:"establishedMessage,omitempty"`
	ServedVersions     []string `json:"servedVersions,omitempty"`
	Error              string   `json:"error,omitempty"`
}

// ControllerFacts is the outcome of GET <url>/readyz.
type ControllerFacts struct {
	URL        string `json:"url"`
	StatusCode int    `json:"statusCode,omitempty"`
	Body       string `json:"body,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Check is one diagnostic.
type Check struct {
	ID   string
	Name string
	Run  func(s *inventory.Snapshot, f *Facts) Result
}

// Checks are all checks in ID order.
var Checks = []Check{
	{IDResourceAPI, "resource.k8s.io/v1 served", checkResourceAPI},
	{IDServerVersion, "Kubernetes server version", checkServerVersion},
	{IDCRD, "SimulatedDevicePool CRD installed", checkCRD},
	{IDController, "DRAForge controller ready", checkController},
	{IDClassCEL, "DeviceClass CEL selectors compile", needSnapshot(checkClassCEL)},
	{IDPoolConsistency, "Pool generation and slice count", needSnapshot(checkPoolConsistency)},
	{IDDuplicateDevices, "Unique device names per pool", needSnapshot(checkDuplicateDevices)},
	{IDOrphanedClaims, "Allocated claims have consumers", needSnapshot(checkOrphanedClaims)},
	{IDSliceNodes, "ResourceSlices reference existing nodes", needSnapshot(checkSliceNodes)},
	{IDPodClaimRefs, "Pods reference existing claims", needSnapshot(checkPodClaimRefs)},
	{IDFeatures, "DRA feature gates and API versions", checkFeatures},
	{IDHealthTaints, "Device health taints", needSnapshot(checkHealthTaints)},
	{IDNodeAllocatable, "Node-allocatable mappings kept", checkNodeAllocatable},
	{IDNVLinkCliques, "Nodes in their NVLink clique", needSnapshot(checkNVLinkCliques)},
}

// Run runs every check. s may be nil when f.SnapshotError says why.
func Run(s *inventory.Snapshot, f Facts) *Report {
	r := &Report{Summary: map[Status]int{Pass: 0, Warn: 0, Fail: 0, Skip: 0}}
	for _, c := range Checks {
		res := c.Run(s, &f)
		res.ID, res.Name = c.ID, c.Name
		slices.Sort(res.Evidence)
		r.Results = append(r.Results, res)
		r.Summary[res.Status]++
	}
	return r
}

func needSnapshot(fn func(*inventory.Snapshot) Result) func(*inventory.Snapshot, *Facts) Result {
	return func(s *inventory.Snapshot, f *Facts) Result {
		if s == nil {
			msg := "cluster state not read"
			if f.SnapshotError != "" {
				msg += ": " + f.SnapshotError
			}
			return Result{Status: Skip, Message: msg}
		}
		return fn(s)
	}
}

func checkResourceAPI(_ *inventory.Snapshot, f *Facts) Result {
	a := f.ResourceAPI
	if a == nil {
		return Result{Status: Skip, Message: "API discovery not collected"}
	}
	ev := []string{"served versions of resource.k8s.io: " + orNone(a.Versions)}
	if a.Error != "" {
		ev = append(ev, "discovery error: "+a.Error)
	}
	if !slices.Contains(a.Versions, "v1") {
		return Result{Status: Fail, Message: "resource.k8s.io/v1 is not served", Evidence: ev,
			Remediation: "use Kubernetes 1.34 or newer with the resource.k8s.io/v1 API enabled (--runtime-config=resource.k8s.io/v1=true if it was disabled)"}
	}
	var missing []string
	for _, want := range []string{"deviceclasses", "resourceclaims", "resourceclaims/status", "resourceslices"} {
		if !slices.Contains(a.V1Resources, want) {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		return Result{Status: Fail, Message: "resource.k8s.io/v1 lacks " + strings.Join(missing, ", "), Evidence: ev,
			Remediation: "enable the DynamicResourceAllocation feature and the resource.k8s.io/v1 resources on the API server"}
	}
	return Result{Status: Pass, Message: "resource.k8s.io/v1 serves deviceclasses, resourceclaims, resourceslices", Evidence: ev}
}

func checkServerVersion(_ *inventory.Snapshot, f *Facts) Result {
	if f.ServerVersion == "" {
		if f.VersionError != "" {
			return Result{Status: Fail, Message: "cannot read /version", Evidence: []string{f.VersionError},
				Remediation: "check that the API server is reachable and /version is allowed for this user"}
		}
		return Result{Status: Skip, Message: "server version not collected"}
	}
	v, err := utilversion.ParseGeneric(f.ServerVersion)
	if err != nil {
		return Result{Status: Warn, Message: "unrecognized server version " + f.ServerVersion, Evidence: []string{err.Error()}}
	}
	ev := []string{"gitVersion " + f.ServerVersion}
	if v.LessThan(MinServerVersion) {
		return Result{Status: Fail, Message: fmt.Sprintf("Kubernetes %s is older than %s", v, MinServerVersion), Evidence: ev,
			Remediation: "upgrade the cluster to Kubernetes 1.34 or newer (resource.k8s.io/v1)"}
	}
	return Result{Status: Pass, Message: fmt.Sprintf("Kubernetes %s (>= %s)", v, MinServerVersion), Evidence: ev}
}

func checkCRD(_ *inventory.Snapshot, f *Facts) Result {
	c := f.CRD
	switch {
	case c == nil:
		return Result{Status: Skip, Message: "CRD not checked"}
	case c.Error != "":
		return Result{Status: Fail, Message: "cannot read CRD " + c.Name, Evidence: []string{c.Error},
			Remediation: "allow get on customresourcedefinitions.apiextensions.k8s.io for this user, or check API server health"}
	case !c.Found:
		return Result{Status: Fail, Message: "CRD " + c.Name + " is not installed",
			Remediation: "kubectl apply --server-side -f deploy/crds/simulateddevicepool-crd.yaml"}
	case !c.Established:
		return Result{Status: Fail, Message: "CRD " + c.Name + " is not Established", Evidence: []string{c.EstablishedMessage},
			Remediation: "check the CRD's conditions (kubectl describe crd " + c.Name + "); a name conflict (NamesAccepted=False) blocks it"}
	case !slices.Contains(c.ServedVersions, "v1alpha1"):
		return Result{Status: Fail, Message: "CRD " + c.Name + " does not serve v1alpha1", Evidence: []string{"served: " + orNone(c.ServedVersions)},
			Remediation: "re-apply deploy/crds/simulateddevicepool-crd.yaml from this DRAForge version"}
	}
	return Result{Status: Pass, Message: "CRD " + c.Name + " is installed and Established", Evidence: []string{"served: " + orNone(c.ServedVersions)}}
}

func checkController(_ *inventory.Snapshot, f *Facts) Result {
	c := f.Controller
	if c == nil {
		return Result{Status: Skip, Message: "no --controller-url given"}
	}
	ev := []string{"GET " + strings.TrimSuffix(c.URL, "/") + "/readyz"}
	switch {
	case c.Error != "":
		return Result{Status: Fail, Message: "controller not reachable", Evidence: append(ev, c.Error),
			Remediation: "check that the controller runs and --controller-url points at its --runtime-address or --debug-address (port-forward it if it runs in the cluster)"}
	case c.StatusCode != 200:
		return Result{Status: Fail, Message: fmt.Sprintf("controller /readyz returned %d", c.StatusCode), Evidence: append(ev, strings.TrimSpace(c.Body)),
			Remediation: "read the controller logs; /readyz fails when it cannot reach the API server or its caches have not synced"}
	}
	return Result{Status: Pass, Message: "controller is ready", Evidence: append(ev, strings.TrimSpace(c.Body))}
}

func checkClassCEL(s *inventory.Snapshot) Result {
	compiler := cel.GetCompiler(cel.Features{EnableConsumableCapacity: true})
	var ev []string
	n := 0
	for _, c := range s.Classes {
		for i, sel := range c.Spec.Selectors {
			if sel.CEL == nil {
				continue
			}
			n++
			if res := compiler.CompileCELExpression(sel.CEL.Expression, cel.Options{}); res.Error != nil {
				ev = append(ev, fmt.Sprintf("DeviceClass %s selector #%d: %s", c.Name, i, res.Error.Error()))
			}
		}
	}
	if len(ev) > 0 {
		return Result{Status: Fail, Message: fmt.Sprintf("%d of %d CEL selectors do not compile", len(ev), n), Evidence: ev,
			Remediation: "fix the expressions (they must evaluate to bool over device.driver, device.attributes and device.capacity); claims using these classes cannot be allocated"}
	}
	return Result{Status: Pass, Message: fmt.Sprintf("%d CEL selectors in %d DeviceClasses compile", n, len(s.Classes))}
}

func checkPoolConsistency(s *inventory.Snapshot) Result {
	var fail, warn []string
	pools := inventory.Pools(s, false)
	for _, p := range pools {
		for _, prob := range p.Problems {
			fail = append(fail, fmt.Sprintf("pool %s: %s", p.PoolID, prob))
		}
		if p.StaleSlices > 0 {
			warn = append(warn, fmt.Sprintf("pool %s: %d slices of an older generation than %d (ignored by allocators)", p.PoolID, p.StaleSlices, p.Generation))
		}
	}
	switch {
	case len(fail) > 0:
		return Result{Status: Fail, Message: fmt.Sprintf("%d incomplete or inconsistent pools", countPools(fail)), Evidence: append(fail, warn...),
			Remediation: "the publisher must write every slice of a pool with the same generation and resourceSliceCount equal to the number of slices; incomplete pools are skipped by the allocator. For SimulatedDevicePools check the controller logs and the pool's Synced condition"}
	case len(warn) > 0:
		return Result{Status: Warn, Message: "pools have leftover slices of older generations", Evidence: warn,
			Remediation: "the publisher should delete slices of older generations once the new generation is complete"}
	}
	return Result{Status: Pass, Message: fmt.Sprintf("%d pools complete and consistent", len(pools))}
}

func countPools(ev []string) int {
	set := sets.New[string]()
	for _, e := range ev {
		p, _, _ := strings.Cut(e, ": ")
		set.Insert(p)
	}
	return set.Len()
}

func checkDuplicateDevices(s *inventory.Snapshot) Result {
	type key struct{ driver, pool, device string }
	seen := map[key][]string{}
	gen := map[inventory.PoolID]int64{}
	for _, sl := range s.Slices {
		id := inventory.PoolID{Driver: sl.Spec.Driver, Pool: sl.Spec.Pool.Name}
		gen[id] = max(gen[id], sl.Spec.Pool.Generation)
	}
	for _, sl := range s.Slices {
		if sl.Spec.Pool.Generation != gen[inventory.PoolID{Driver: sl.Spec.Driver, Pool: sl.Spec.Pool.Name}] {
			continue
		}
		for _, d := range sl.Spec.Devices {
			k := key{sl.Spec.Driver, sl.Spec.Pool.Name, d.Name}
			seen[k] = append(seen[k], sl.Name)
		}
	}
	var ev []string
	for k, sls := range seen {
		if len(sls) > 1 {
			slices.Sort(sls)
			ev = append(ev, fmt.Sprintf("device %s in pool %s/%s appears %d times (slices %s)", k.device, k.driver, k.pool, len(sls), strings.Join(sls, ", ")))
		}
	}
	if len(ev) > 0 {
		return Result{Status: Fail, Message: fmt.Sprintf("%d duplicate device names", len(ev)), Evidence: ev,
			Remediation: "device names must be unique within a pool (driver/pool): give each node its own pool, or name devices uniquely across the pool's slices; two SimulatedDevicePools with the same driverName and poolName in one namespace collide"}
	}
	return Result{Status: Pass, Message: "device names are unique within every pool"}
}

func checkOrphanedClaims(s *inventory.Snapshot) Result {
	simulated := map[string]bool{} // driver/pool published by a SimulatedDevicePool
	for _, sl := range s.Slices {
		if sl.Labels[simdevice.LabelSDPUID] != "" {
			simulated[sl.Spec.Driver+"/"+sl.Spec.Pool.Name] = true
		}
	}
	var ev []string
	standalone := 0
	for _, c := range s.Claims {
		if c.Status.Allocation == nil || len(c.Status.ReservedFor) > 0 || c.DeletionTimestamp != nil {
			continue
		}
		if len(inventory.ClaimPods(s, c)) > 0 {
			continue // a pod uses it; the scheduler reserves it when the pod is scheduled
		}
		if len(c.OwnerReferences) == 0 && simulatedOnly(c, simulated) {
			standalone++ // a standalone claim the simulator allocated: that is what it is for
			continue
		}
		owner := "no owner"
		for _, ref := range c.OwnerReferences {
			if ptr.Deref(ref.Controller, false) {
				owner = fmt.Sprintf("owner %s %s (not found)", ref.Kind, ref.Name)
			}
		}
		ev = append(ev, fmt.Sprintf("claim %s/%s is allocated, reserved for nobody, %s", c.Namespace, c.Name, owner))
	}
	if len(ev) > 0 {
		return Result{Status: Warn, Message: fmt.Sprintf("%d allocated claims without consumers", len(ev)), Evidence: ev,
			Remediation: "delete claims that are no longer needed to free their devices, or create the pods that consume them"}
	}
	if standalone > 0 {
		return Result{Status: Pass, Message: fmt.Sprintf("every allocated claim has a consumer or an owner pod, except %d standalone claims allocated on simulated devices", standalone)}
	}
	return Result{Status: Pass, Message: "every allocated claim has a consumer or an owner pod"}
}

// simulatedOnly reports whether every device of the claim's allocation is simulated.
func simulatedOnly(c *resourcev1.ResourceClaim, simulated map[string]bool) bool {
	for _, r := range c.Status.Allocation.Devices.Results {
		if !simulated[r.Driver+"/"+r.Pool] {
			return false
		}
	}
	return len(c.Status.Allocation.Devices.Results) > 0
}

func checkSliceNodes(s *inventory.Snapshot) Result {
	var ev []string
	for _, sl := range s.Slices {
		if n := ptr.Deref(sl.Spec.NodeName, ""); n != "" && s.Node(n) == nil {
			ev = append(ev, fmt.Sprintf("ResourceSlice %s (pool %s/%s) is for node %s, which does not exist", sl.Name, sl.Spec.Driver, sl.Spec.Pool.Name, n))
		}
	}
	if len(ev) > 0 {
		return Result{Status: Fail, Message: fmt.Sprintf("%d slices reference missing nodes", len(ev)), Evidence: ev,
			Remediation: "devices on missing nodes can never be allocated: create the Node objects, or remove the node from the SimulatedDevicePool's targetNodes/nodeSelector (the publisher deletes slices of nodes that are gone)"}
	}
	return Result{Status: Pass, Message: "every node-local ResourceSlice names an existing node"}
}

// maxHealthEvidence caps the devices checkHealthTaints lists (a fault campaign taints many).
const maxHealthEvidence = 20

// checkHealthTaints lists the devices whose driver published a health taint in its
// ResourceSlices (the NVIDIA driver's gpu.nvidia.com/xid, gpu-lost, unmonitored; the Intel
// driver's HealthIssues-<categories>; devicehealth.Meaning), newest pool generation only: WARN when one keeps new claims off a device
// (NoSchedule, NoExecute), PASS when they are all informational (None) or there are none.
func checkHealthTaints(s *inventory.Snapshot) Result {
	gen := map[inventory.PoolID]int64{}
	for _, sl := range s.Slices {
		id := inventory.PoolID{Driver: sl.Spec.Driver, Pool: sl.Spec.Pool.Name}
		gen[id] = max(gen[id], sl.Spec.Pool.Generation)
	}
	var blocking, informational []string
	for _, sl := range s.Slices {
		if sl.Spec.Pool.Generation != gen[inventory.PoolID{Driver: sl.Spec.Driver, Pool: sl.Spec.Pool.Name}] {
			continue
		}
		for _, d := range sl.Spec.Devices {
			for _, t := range d.Taints {
				m := devicehealth.Meaning(t)
				if m == "" {
					continue
				}
				line := fmt.Sprintf("device %s/%s/%s: taint %s=%s:%s: %s", sl.Spec.Driver, sl.Spec.Pool.Name, d.Name, t.Key, t.Value, t.Effect, m)
				if t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute {
					blocking = append(blocking, line)
				} else {
					informational = append(informational, line)
				}
			}
		}
	}
	if len(blocking) == 0 {
		if len(informational) > 0 {
			return Result{Status: Pass, Message: fmt.Sprintf("%d informational health taints (effect None): they keep no claim off a device%s", len(informational), listed(len(informational))), Evidence: capEvidence(informational)}
		}
		return Result{Status: Pass, Message: "no device carries a driver health taint"}
	}
	return Result{Status: Warn, Message: fmt.Sprintf("%d driver health taints keep new claims off their devices (running pods stay unless the effect is NoExecute)%s", len(blocking), listed(len(blocking)+len(informational))),
		Evidence:    capEvidence(append(blocking, informational...)),
		Remediation: "the driver published these taints after a device health event. For a SimulatedDevicePool, clear the fault (draforge inject-fault POOL --device D --node N --mode healthy, or draforge clear-faults POOL) and the taint goes; the real NVIDIA driver keeps the taint until its kubelet plugin restarts, the Intel driver removes its NoExecute taint once every health category is healthy again. A claim that may use such a device tolerates the taint (spec.devices.requests[].exactly.tolerations)"}
}

// checkNVLinkCliques lists simulated nodes out of their NVLink clique: every GPU's fabric is
// detached, so (simulated) GPU Feature Discovery dropped nvidia.com/gpu.clique and pods needing
// the clique no longer fit there.
func checkNVLinkCliques(s *inventory.Snapshot) Result {
	var out []string
	for _, n := range s.Nodes {
		if c, left := simdevice.LeftClique(n.Labels, n.Annotations); left {
			out = append(out, fmt.Sprintf("node %s left clique %s: every GPU's NVLink fabric is detached", n.Name, c))
		}
	}
	if len(out) == 0 {
		return Result{Status: Pass, Message: "no node is out of its NVLink clique"}
	}
	return Result{Status: Warn, Message: fmt.Sprintf("%d nodes out of their NVLink clique: pods that need the clique (node affinity on %s) do not fit there%s", len(out), simdevice.CliqueLabel, listed(len(out))),
		Evidence:    capEvidence(out),
		Remediation: "the NVLink fabric of every GPU of these nodes is detached (SimulatedDevicePool faults or faultCampaigns with mode fabric-detached). Clear the faults (draforge inject-fault POOL --device D --node N --mode healthy, or draforge clear-faults POOL) or remove the campaign entry, and the label comes back"}
}

// capEvidence keeps the first maxHealthEvidence lines, sorted.
func capEvidence(ev []string) []string {
	slices.Sort(ev)
	return ev[:min(len(ev), maxHealthEvidence)]
}

// listed says how many of n evidence lines are listed, when not all.
func listed(n int) string {
	if n <= maxHealthEvidence {
		return ""
	}
	return fmt.Sprintf(" (the first %d listed)", maxHealthEvidence)
}

func checkPodClaimRefs(s *inventory.Snapshot) Result {
	var ev []string
	for _, p := range s.Pods {
		// A pod in a terminal phase needs no claim any more: kube-controller-manager's
		// resourceclaim controller deletes the claims generated for a done pod
		// (pkg/controller/resourceclaim/controller.go syncClaim, "deleting unused generated
		// claim" when isPodDone), and a standalone claim may be deleted once it ran. Nothing
		// waits on them, so a missing one is not a problem to report.
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimName != nil && s.Claim(p.Namespace, *rc.ResourceClaimName) == nil {
				ev = append(ev, fmt.Sprintf("pod %s/%s: claim %s (entry %s) does not exist", p.Namespace, p.Name, *rc.ResourceClaimName, rc.Name))
			}
		}
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.ResourceClaimName != nil && s.Claim(p.Namespace, *st.ResourceClaimName) == nil {
				ev = append(ev, fmt.Sprintf("pod %s/%s: generated claim %s (entry %s) does not exist", p.Namespace, p.Name, *st.ResourceClaimName, st.Name))
			}
		}
	}
	if len(ev) > 0 {
		return Result{Status: Warn, Message: fmt.Sprintf("%d pod claim references point at missing claims", len(ev)), Evidence: ev,
			Remediation: "create the named ResourceClaims (pods stay unschedulable until they exist), or fix spec.resourceClaims"}
	}
	return Result{Status: Pass, Message: "every claim referenced by a pod exists"}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b string) int { return cmp.Compare(a, b) })
	return strings.Join(s, ", ")
}
