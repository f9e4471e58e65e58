package explain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/simdevice"
)

// PodNotFoundError is returned when the snapshot has no such pod.
type PodNotFoundError struct{ Namespace, Name string }

func (e *PodNotFoundError) Error() string {
	return fmt.Sprintf("Pod %q not found in namespace %q", e.Name, e.Namespace)
}

// podClaimNameAnnotation is set by the upstream resourceclaim controller on the claims it
// generates from a pod's ResourceClaimTemplate (pkg/controller/resourceclaim/controller.go,
// annotation resource.kubernetes.io/pod-claim-name), naming the pod's claim entry.
const podClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name"

// Pod claim sources (PodClaim.Source).
const (
	SourceClaim    = "ResourceClaim"         // spec.resourceClaims[].resourceClaimName
	SourceTemplate = "ResourceClaimTemplate" // spec.resourceClaims[].resourceClaimTemplateName
)

// PodResult explains one pod: its claims (each explained like a standalone claim) and what the
// scheduler wrote on it.
type PodResult struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	Node      string `json:"node,omitempty"`
	// Summary is one line: the devices the pod holds, or why it is pending.
	Summary string `json:"summary"`
	// Scheduler is the PodScheduled=False condition's reason and message (the non-DRA reasons
	// such as "0/3 nodes are available: 1 Insufficient cpu"), when the scheduler wrote one.
	Scheduler *SchedulerCondition `json:"scheduler,omitempty"`
	Claims    []PodClaim          `json:"claims"`
	// Devices are the devices of the pod's allocated claims (with their node).
	Devices []PodDevice `json:"devices,omitempty"`
	// Gang is the PodGroup the pod belongs to (spec.schedulingGroup), if any.
	Gang *PodGang `json:"gang,omitempty"`
	// LeftClique are the nodes that left their NVLink clique (every GPU's fabric detached, so
	// GPU Feature Discovery dropped nvidia.com/gpu.clique), listed for a pending pod that needs
	// the clique label.
	LeftClique []CliqueNode `json:"leftClique,omitempty"`
}

// CliqueNode is a node out of its NVLink clique, and the clique it left.
type CliqueNode struct {
	Node   string `json:"node"`
	Clique string `json:"clique"`
}

// PodGang is a pod's PodGroup and how far its gang got: kube-scheduler places a gang's pods
// all or none, so a member waits while the group as a whole does not fit.
type PodGang struct {
	PodGroup string `json:"podGroup"`
	// Found is false when the snapshot has no such PodGroup (not created yet, or the cluster
	// does not serve PodGroups): kube-scheduler does not place the pod until it exists.
	// Unread is true when the snapshot holds no PodGroups at all (they were not read), so
	// nothing is known of the group but its members.
	Found  bool `json:"found"`
	Unread bool `json:"unread,omitempty"`
	// Policy is "gang" (MinCount pods or none) or "basic" (each pod on its own).
	Policy   string `json:"policy,omitempty"`
	MinCount int32  `json:"minCount,omitempty"`
	// Members are the pods naming the group, Placed those bound to a node.
	Members int `json:"members"`
	Placed  int `json:"placed"`
	// Scheduling is the PodGroup's PodGroupInitiallyScheduled condition: kube-scheduler's
	// verdict on the group (why the rest wait).
	Scheduling *GangCondition `json:"scheduling,omitempty"`
	// Claims are the claims made for the group (reserved for it, shared by its pods).
	Claims []GangClaim `json:"claims,omitempty"`
}

// GangCondition is a PodGroup condition.
type GangCondition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// GangClaim is one of a PodGroup's resourceClaims and the claim made for it.
type GangClaim struct {
	Name  string `json:"name"`
	Claim string `json:"claim,omitempty"`
}

// SchedulerCondition is the pod's PodScheduled=False condition.
type SchedulerCondition struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// PodClaim is one entry of spec.resourceClaims and the ResourceClaim behind it.
type PodClaim struct {
	Name   string `json:"name"`   // the entry's name in the pod
	Source string `json:"source"` // SourceClaim or SourceTemplate
	// SourceName is the claim's or the template's name.
	SourceName string `json:"sourceName"`
	// Claim is the ResourceClaim's name: SourceName for SourceClaim, the generated name from
	// status.resourceClaimStatuses for templates; "" when none exists yet.
	Claim string `json:"claim,omitempty"`
	// Problem says why there is no claim to explain (not generated yet, not found).
	Problem string `json:"problem,omitempty"`
	// ReservedForPod is true when the claim's status.reservedFor names this pod.
	ReservedForPod bool    `json:"reservedForPod"`
	Explanation    *Result `json:"explanation,omitempty"`
}

// PodDevice is one device a pod's claim is allocated.
type PodDevice struct {
	Claim   string `json:"claim"`
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	Node    string `json:"node,omitempty"`
}

// Pod returns the pod namespace/name of s, or nil.
func Pod(s *inventory.Snapshot, namespace, name string) *corev1.Pod {
	for _, p := range s.Pods {
		if p.Namespace == namespace && p.Name == name {
			return p
		}
	}
	return nil
}

// ExplainPod explains the pod namespace/name of s: each of its claims through Explain (the
// same allocator explanation as for a standalone claim) and the scheduler's condition.
func ExplainPod(ctx context.Context, s *inventory.Snapshot, namespace, name string) (*PodResult, error) {
	pod := Pod(s, namespace, name)
	if pod == nil {
		return nil, &PodNotFoundError{Namespace: namespace, Name: name}
	}
	r := &PodResult{Namespace: pod.Namespace, Name: pod.Name, Phase: string(pod.Status.Phase), Node: pod.Spec.NodeName, Claims: []PodClaim{}}
	if r.Phase == "" {
		r.Phase = string(corev1.PodPending)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			r.Scheduler = &SchedulerCondition{Reason: c.Reason, Message: c.Message}
		}
	}
	for _, prc := range pod.Spec.ResourceClaims {
		pc := podClaim(s, pod, prc)
		if pc.Claim != "" {
			res, err := Explain(ctx, s, pod.Namespace, pc.Claim)
			switch {
			case IsNotFound(err):
				pc.Problem = fmt.Sprintf("ResourceClaim %s/%s does not exist", pod.Namespace, pc.Claim)
			case err != nil:
				return nil, err
			default:
				pc.Explanation = res
				claim := s.Claim(pod.Namespace, pc.Claim)
				pc.ReservedForPod = reservedFor(claim, pod)
				for _, a := range res.Claim.Allocations {
					r.Devices = append(r.Devices, PodDevice{Claim: pc.Claim, Request: a.Request, Driver: a.Driver, Pool: a.Pool, Device: a.Device, Node: res.Claim.Node})
				}
			}
		}
		r.Claims = append(r.Claims, pc)
	}
	r.Gang = podGang(s, pod)
	if needed, wanted := needsClique(pod); needed && r.Node == "" {
		r.LeftClique = leftClique(s, wanted)
	}
	r.Summary = podSummary(pod, r)
	return r, nil
}

// needsClique reports whether the pod can only run on a node labelled with an NVLink clique (a
// node selector or required node affinity on the label, or required pod affinity with it as
// topology key), and the cliques it may use: nil for any, else those its selector names.
func needsClique(pod *corev1.Pod) (bool, []string) {
	if c, ok := pod.Spec.NodeSelector[simdevice.CliqueLabel]; ok {
		return true, []string{c}
	}
	a := pod.Spec.Affinity
	if a == nil {
		return false, nil
	}
	if na := a.NodeAffinity; na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				switch {
				case e.Key != simdevice.CliqueLabel:
				case e.Operator == corev1.NodeSelectorOpExists:
					return true, nil
				case e.Operator == corev1.NodeSelectorOpIn:
					return true, e.Values
				}
			}
		}
	}
	if pa := a.PodAffinity; pa != nil {
		for _, term := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			if term.TopologyKey == simdevice.CliqueLabel {
				return true, nil
			}
		}
	}
	return false, nil
}

// leftClique lists the nodes whose clique label is gone while their fabric is detached, of the
// cliques the pod may use (any when wanted is nil).
func leftClique(s *inventory.Snapshot, wanted []string) []CliqueNode {
	var out []CliqueNode
	for _, n := range s.Nodes {
		if c, left := simdevice.LeftClique(n.Labels, n.Annotations); left && (wanted == nil || slices.Contains(wanted, c)) {
			out = append(out, CliqueNode{Node: n.Name, Clique: c})
		}
	}
	return out
}

// podGang reads the pod's PodGroup and its members from s (nil for a pod in no group).
func podGang(s *inventory.Snapshot, pod *corev1.Pod) *PodGang {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return nil
	}
	name := *pod.Spec.SchedulingGroup.PodGroupName
	g := &PodGang{PodGroup: name}
	for _, p := range s.Pods {
		if p.Namespace == pod.Namespace && p.Spec.SchedulingGroup != nil && ptr.Deref(p.Spec.SchedulingGroup.PodGroupName, "") == name {
			g.Members++
			if p.Spec.NodeName != "" {
				g.Placed++
			}
		}
	}
	if !s.PodGroupsRead {
		g.Unread = true
		return g
	}
	i := slices.IndexFunc(s.PodGroups, func(pg *schedulingv1beta1.PodGroup) bool { return pg.Namespace == pod.Namespace && pg.Name == name })
	if i < 0 {
		return g
	}
	pg := s.PodGroups[i]
	g.Found = true
	switch policy := pg.Spec.SchedulingPolicy; {
	case policy.Gang != nil:
		g.Policy, g.MinCount = "gang", policy.Gang.MinCount
	case policy.Basic != nil:
		g.Policy = "basic"
	}
	if c := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled); c != nil {
		g.Scheduling = &GangCondition{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
	}
	for _, rc := range pg.Spec.ResourceClaims {
		gc := GangClaim{Name: rc.Name, Claim: ptr.Deref(rc.ResourceClaimName, "")}
		for _, st := range pg.Status.ResourceClaimStatuses {
			if st.Name == rc.Name {
				gc.Claim = ptr.Deref(st.ResourceClaimName, "")
			}
		}
		g.Claims = append(g.Claims, gc)
	}
	return g
}

// podClaim resolves one spec.resourceClaims entry to its ResourceClaim name.
func podClaim(s *inventory.Snapshot, pod *corev1.Pod, prc corev1.PodResourceClaim) PodClaim {
	pc := PodClaim{Name: prc.Name}
	switch {
	case prc.ResourceClaimName != nil:
		pc.Source, pc.SourceName, pc.Claim = SourceClaim, *prc.ResourceClaimName, *prc.ResourceClaimName
		return pc
	case prc.ResourceClaimTemplateName != nil:
		pc.Source, pc.SourceName = SourceTemplate, *prc.ResourceClaimTemplateName
	default:
		pc.Problem = "the entry names neither a ResourceClaim nor a ResourceClaimTemplate"
		return pc
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name != prc.Name {
			continue
		}
		if st.ResourceClaimName == nil {
			// Upstream: unset means no claim was needed for this entry.
			pc.Problem = "kube-controller-manager decided that no ResourceClaim is needed for this entry"
			return pc
		}
		pc.Claim = *st.ResourceClaimName
		return pc
	}
	// The status is written after the claim is created; a claim the pod controls that carries
	// the entry's name is the same claim seen a moment earlier.
	for _, c := range s.Claims {
		if c.Namespace == pod.Namespace && c.Annotations[podClaimNameAnnotation] == prc.Name && allocator.PodReferencesClaim(pod, c) {
			pc.Claim = c.Name
			return pc
		}
	}
	pc.Problem = fmt.Sprintf("no ResourceClaim has been generated from template %q yet (kube-controller-manager's resourceclaim controller creates it and records it in status.resourceClaimStatuses)", pc.SourceName)
	return pc
}

// reservedFor reports whether c is reserved for pod, or for the pod's PodGroup (a claim made
// for a gang, as a kubelet with DRAWorkloadResourceClaims accepts it).
func reservedFor(c *resourcev1.ResourceClaim, pod *corev1.Pod) bool {
	if c == nil {
		return false
	}
	// By UID or by PodGroup; a pod without a UID (a hand-made snapshot) matches by name below.
	if pod.UID != "" && resourceclaim.IsReservedForPod(pod, c, true) {
		return true
	}
	for _, ref := range c.Status.ReservedFor {
		if ref.Resource == "pods" && ref.Name == pod.Name && (ref.UID == "" || ref.UID == pod.UID) {
			return true
		}
	}
	return false
}

func podSummary(pod *corev1.Pod, r *PodResult) string {
	var devs []string
	for _, d := range r.Devices {
		devs = append(devs, d.Claim+":"+d.Request+"="+d.Driver+"/"+d.Pool+"/"+d.Device)
	}
	holds := "no devices"
	if len(devs) > 0 {
		holds = strings.Join(devs, ", ")
	}
	switch {
	case pod.DeletionTimestamp != nil:
		return "terminating; holds " + holds
	case r.Node != "":
		var unreserved []string
		for _, c := range r.Claims {
			if c.Explanation != nil && !c.ReservedForPod {
				unreserved = append(unreserved, c.Claim)
			}
		}
		s := strings.ToLower(r.Phase) + " on node " + r.Node + "; holds " + holds
		if len(unreserved) > 0 {
			s += " (not reserved for the pod: " + strings.Join(unreserved, ", ") + ")"
		}
		return s
	}
	var why []string
	for _, c := range r.Claims {
		switch {
		case c.Problem != "":
			why = append(why, "claim "+c.Name+": "+c.Problem)
		case c.Explanation != nil && c.Explanation.Claim.State == inventory.ClaimPending:
			why = append(why, "claim "+c.Claim+" pending: "+c.Explanation.Summary)
		}
	}
	if g := r.Gang; g != nil {
		switch {
		case g.Unread:
		case !g.Found:
			why = append(why, "PodGroup "+g.PodGroup+" does not exist")
		case g.Policy == "gang":
			why = append(why, fmt.Sprintf("gang %s: %d of %d pods placed, minCount %d", g.PodGroup, g.Placed, g.Members, g.MinCount))
		}
	}
	if r.Scheduler != nil && r.Scheduler.Message != "" {
		why = append(why, "scheduler: "+r.Scheduler.Message)
	}
	if len(r.LeftClique) > 0 {
		var nodes []string
		for _, n := range r.LeftClique {
			nodes = append(nodes, n.Node)
		}
		why = append(why, fmt.Sprintf("the pod needs an NVLink clique and %d node(s) left theirs (NVLink fabric detached): %s", len(nodes), strings.Join(nodes, ", ")))
	}
	if len(why) == 0 {
		return "not scheduled yet (the scheduler has not written a reason)"
	}
	return "pending: " + strings.Join(why, "; ")
}

// RenderPod writes a human-readable pod explanation; each claim's part is Render's output,
// indented.
func RenderPod(w io.Writer, r *PodResult, opts RenderOptions) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Pod:       %s/%s\n", r.Namespace, r.Name)
	fmt.Fprintf(&b, "Phase:     %s\n", r.Phase)
	fmt.Fprintf(&b, "Node:      %s\n", ptr.Deref(nonEmpty(r.Node), "(not scheduled)"))
	if r.Scheduler != nil {
		fmt.Fprintf(&b, "Scheduler: %s: %s\n", r.Scheduler.Reason, r.Scheduler.Message)
	}
	fmt.Fprintf(&b, "Summary:   %s\n", r.Summary)
	for _, n := range r.LeftClique {
		fmt.Fprintf(&b, "Clique:    node %s left clique %s: every GPU's NVLink fabric is detached, so GPU Feature Discovery dropped %s\n", n.Node, n.Clique, simdevice.CliqueLabel)
	}
	if g := r.Gang; g != nil {
		renderGang(&b, g)
	}
	if len(r.Devices) > 0 {
		b.WriteString("\nDevices:\n")
		for _, d := range r.Devices {
			fmt.Fprintf(&b, "  %s/%s: %s/%s/%s on %s\n", d.Claim, d.Request, d.Driver, d.Pool, d.Device, ptr.Deref(nonEmpty(d.Node), "(any node)"))
		}
	}
	if len(r.Claims) == 0 {
		b.WriteString("\nThe pod uses no ResourceClaims.\n")
	}
	for _, c := range r.Claims {
		from := c.SourceName
		if c.Source == SourceTemplate {
			from = "template " + c.SourceName
			if c.Claim != "" {
				from += " → " + c.Claim
			}
		}
		fmt.Fprintf(&b, "\nClaim %s (%s):\n", c.Name, from)
		if c.Problem != "" {
			fmt.Fprintf(&b, "  %s\n", c.Problem)
			continue
		}
		if r.Node != "" && !c.ReservedForPod {
			b.WriteString("  (not reserved for this pod)\n")
		}
		var cb strings.Builder
		if err := Render(&cb, c.Explanation, opts); err != nil {
			return err
		}
		for line := range strings.Lines(cb.String()) {
			if strings.TrimSpace(line) == "" {
				b.WriteString("\n")
				continue
			}
			b.WriteString("  " + line)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// renderGang writes the Gang section of a pod explanation.
func renderGang(b *strings.Builder, g *PodGang) {
	fmt.Fprintf(b, "\nGang:      PodGroup %s", g.PodGroup)
	if g.Unread {
		fmt.Fprintf(b, " (PodGroups were not read for this view)\n")
	} else if !g.Found {
		fmt.Fprintf(b, " (not found: kube-scheduler places no member until it exists)\n")
	} else if g.Policy == "gang" {
		fmt.Fprintf(b, " (gang, minCount %d)\n", g.MinCount)
	} else {
		fmt.Fprintf(b, " (%s)\n", g.Policy)
	}
	fmt.Fprintf(b, "  Members: %d pods, %d placed\n", g.Members, g.Placed)
	if c := g.Scheduling; c != nil {
		fmt.Fprintf(b, "  Scheduled: %s", c.Status)
		if c.Reason != "" {
			fmt.Fprintf(b, " (%s)", c.Reason)
		}
		if c.Message != "" {
			fmt.Fprintf(b, ": %s", c.Message)
		}
		b.WriteString("\n")
	}
	for _, c := range g.Claims {
		fmt.Fprintf(b, "  Claim %s: %s (made for the PodGroup, shared by its pods)\n", c.Name, ptr.Deref(nonEmpty(c.Claim), "(not made yet)"))
	}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// IsPodNotFound reports whether err is a PodNotFoundError.
func IsPodNotFound(err error) bool {
	var nf *PodNotFoundError
	return errors.As(err, &nf)
}
