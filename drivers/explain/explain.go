// Package explain tells why a ResourceClaim is pending (or where it is allocated) from a
// Snapshot. It feeds the same structured allocator the controller uses
// (drivers/allocator.Allocator) and calls its Explain, so explain and allocation never disagree.
package explain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/compactslice"
	"github.com/draforge/draforge/drivers/inventory"
	"github.com/draforge/draforge/drivers/simdevice"
)

// NotFoundError is returned when the snapshot has no such claim.
type NotFoundError struct{ Namespace, Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("ResourceClaim %q not found in namespace %q", e.Name, e.Namespace)
}

// IsNotFound reports whether err is a NotFoundError.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}

// Result is the explanation of one claim.
type Result struct {
	Claim inventory.ClaimView `json:"claim"`
	// Summary is one line: where the claim is allocated, or why it is pending.
	Summary string `json:"summary"`
	// ReasonCounts counts the devices rejected per reason code, over all requests, plus
	// ClassNotFound once per request naming a missing DeviceClass.
	ReasonCounts map[string]int `json:"reasonCounts,omitempty"`
	// Explanation is the allocator's answer (empty details for allocated claims).
	Explanation allocator.Explanation `json:"explanation"`
	// Ownership says whether the claim is DRAForge's to allocate (every request can be met
	// only by devices it publishes) or left as Kubernetes leaves it, and why.
	Ownership allocator.Ownership `json:"ownership"`
}

// NewAllocator returns an allocator fed with the snapshot's slices, classes, claims and nodes.
func NewAllocator(s *inventory.Snapshot) *allocator.Allocator {
	a := allocator.New(allocator.Options{})
	for _, sl := range s.Slices {
		a.UpsertSlice(compactslice.From(sl))
	}
	for _, c := range s.Classes {
		a.UpsertClass(c)
	}
	for _, c := range s.Claims {
		a.UpsertClaim(c)
	}
	for _, n := range s.Nodes {
		a.UpsertNode(n)
	}
	for _, r := range s.TaintRules {
		a.UpsertTaintRule(r)
	}
	return a
}

// Explain explains the claim namespace/name of s. Claims of other namespaces than the one
// explained matter for which devices are taken, so s should hold all namespaces' claims (the
// CLI lists them all).
func Explain(ctx context.Context, s *inventory.Snapshot, namespace, name string) (*Result, error) {
	claim := s.Claim(namespace, name)
	if claim == nil {
		return nil, &NotFoundError{Namespace: namespace, Name: name}
	}
	r := &Result{Claim: inventory.Claim(s, claim)}
	a := NewAllocator(s)
	r.Explanation = a.Explain(ctx, claim)
	r.Ownership = a.Ownership(ctx, claim, simdevice.Published)
	if claim.Status.Allocation != nil {
		var devs []string
		for _, a := range r.Claim.Allocations {
			devs = append(devs, a.String())
		}
		where := "allocated"
		if r.Claim.Node != "" {
			where += " on node " + r.Claim.Node
		}
		r.Summary = where + ": " + strings.Join(devs, ", ")
		if len(r.Claim.ReservedFor) == 0 {
			r.Summary += " (reserved for nobody)"
		} else {
			r.Summary += " (reserved for " + strings.Join(r.Claim.ReservedFor, ", ") + ")"
		}
		return r, nil
	}
	r.Summary = r.Explanation.Summary
	counts := map[string]int{}
	for _, req := range r.Explanation.Requests {
		if !req.ClassFound {
			counts[allocator.ReasonClassNotFound]++
		}
		for _, d := range req.Devices {
			for _, reason := range d.Reasons {
				if reason.Code != allocator.ReasonClassNotFound {
					counts[reason.Code]++
				}
			}
		}
	}
	if len(counts) > 0 {
		r.ReasonCounts = counts
	}
	return r, nil
}

// RenderOptions choose the level of detail.
type RenderOptions struct {
	// Devices adds one line per device and request, and one line per node. Without it the
	// output is a summary whose size does not grow with the cluster: per request the devices
	// excluded, counted by reason; nodes grouped by why they do not fit.
	Devices bool
}

// maxNodeNames is how many node names a summary line lists before "and N more".
const maxNodeNames = 3

// Render writes a human-readable explanation.
func Render(w io.Writer, r *Result, opts RenderOptions) error {
	var b strings.Builder
	c := r.Claim
	fmt.Fprintf(&b, "Claim:    %s/%s\n", c.Namespace, c.Name)
	fmt.Fprintf(&b, "State:    %s\n", c.State)
	if len(c.Pods) > 0 {
		fmt.Fprintf(&b, "Pods:     %s\n", strings.Join(c.Pods, ", "))
	}
	if len(c.ReservedFor) > 0 {
		fmt.Fprintf(&b, "Reserved: %s\n", strings.Join(c.ReservedFor, ", "))
	}
	fmt.Fprintf(&b, "Summary:  %s\n", r.Summary)
	fmt.Fprintf(&b, "Scope:    %s\n", Scope(r.Ownership))
	if ap := c.AllocationPod; ap != nil {
		// --allocator kube-scheduler: kube-scheduler decides, for this pod; its verdict first.
		fmt.Fprintf(&b, "Allocation pod: %s\n", ap.Name)
		if ap.Unschedulable != "" {
			fmt.Fprintf(&b, "Scheduler: %s\n", ap.Unschedulable)
		}
	}
	ex := r.Explanation
	if c.State != inventory.ClaimPending {
		if len(c.Allocations) > 0 {
			b.WriteString("\nAllocated devices:\n")
			for _, a := range c.Allocations {
				fmt.Fprintf(&b, "  %s: %s/%s/%s\n", a.Request, a.Driver, a.Pool, a.Device)
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if len(ex.Requests) > 0 {
		b.WriteString("\nRequests:\n")
	}
	hasDevices := false
	for _, req := range ex.Requests {
		want := req.Mode
		if req.Count > 0 {
			want = fmt.Sprintf("%s %d", req.Mode, req.Count)
		}
		fmt.Fprintf(&b, "  %s (class %s, %s): %d matching, %d available\n", req.Name, req.DeviceClass, want, req.Matching, req.Available)
		if !req.ClassFound {
			fmt.Fprintf(&b, "    %s: DeviceClass %q does not exist\n", allocator.ReasonClassNotFound, req.DeviceClass)
			continue // every device has the same reason
		}
		if len(req.Devices) == 0 {
			b.WriteString("    no devices are published\n")
		}
		hasDevices = hasDevices || len(req.Devices) > 0
		if len(req.Excluded) > 0 {
			fmt.Fprintf(&b, "    excluded: %s\n", counts(req.Excluded))
		}
		if req.WithBindingConditions > 0 {
			fmt.Fprintf(&b, "    %d of the available devices have binding conditions: a pod using one binds only after the driver reports them (status.devices[].conditions)\n", req.WithBindingConditions)
		}
		if !opts.Devices {
			continue
		}
		for _, d := range req.Devices {
			node := d.Node
			if node == "" {
				node = "(any node)"
			}
			id := d.Driver + "/" + d.Pool + "/" + d.Device
			if d.Available {
				fmt.Fprintf(&b, "    %-12s %s: available\n", node, id)
				continue
			}
			var rs []string
			for _, reason := range d.Reasons {
				rs = append(rs, reason.Code+": "+reason.Message)
			}
			fmt.Fprintf(&b, "    %-12s %s: %s\n", node, id, strings.Join(rs, "; "))
		}
	}
	if len(ex.Nodes) > 0 {
		fits := 0
		for _, n := range ex.Nodes {
			if n.Fits {
				fits++
			}
		}
		fmt.Fprintf(&b, "\nNodes: %d of %d fit the whole claim\n", fits, len(ex.Nodes))
		if opts.Devices {
			for _, n := range ex.Nodes {
				fmt.Fprintf(&b, "  %-12s %s: %s\n", n.Node, verdict(n), n.Summary)
			}
		} else {
			for _, g := range groupNodes(ex.Nodes) {
				names := g.nodes
				more := ""
				if len(names) > maxNodeNames {
					more = fmt.Sprintf(" and %d more", len(names)-maxNodeNames)
					names = names[:maxNodeNames]
				}
				fmt.Fprintf(&b, "  %s (%d): %s\n    %s%s\n", g.verdict, len(g.nodes), g.summary, strings.Join(names, ", "), more)
			}
		}
	}
	if len(ex.Remedies) > 0 {
		b.WriteString("\nRemedies:\n")
		for _, rem := range ex.Remedies {
			fmt.Fprintf(&b, "  - %s\n", rem)
		}
	}
	if len(r.ReasonCounts) > 0 {
		fmt.Fprintf(&b, "\nReasons: %s\n", counts(r.ReasonCounts))
	}
	if hasDevices && !opts.Devices {
		b.WriteString("\nPer-device and per-node lines: --devices\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Scope says in one line whether DRAForge acts on a claim, and why.
func Scope(o allocator.Ownership) string {
	if o.Owned {
		return "simulated: " + o.Reason
	}
	return "left to Kubernetes, DRAForge never allocates it nor writes to it (kube-scheduler allocates it for the first pod that uses it): " + o.Reason
}

func verdict(n allocator.NodeExplanation) string {
	if n.Fits {
		return "fits"
	}
	return "does not fit"
}

// nodeGroup is the nodes sharing a verdict and the reason for it.
type nodeGroup struct {
	verdict, summary string
	nodes            []string
}

// groupNodes groups nodes by verdict and summary: fitting nodes first, then the largest groups.
func groupNodes(nodes []allocator.NodeExplanation) []nodeGroup {
	index := map[[2]string]int{}
	var out []nodeGroup
	for _, n := range nodes {
		k := [2]string{verdict(n), n.Summary}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, nodeGroup{verdict: k[0], summary: k[1]})
		}
		out[i].nodes = append(out[i].nodes, n.Node)
	}
	slices.SortStableFunc(out, func(x, y nodeGroup) int {
		if (x.verdict == "fits") != (y.verdict == "fits") {
			if x.verdict == "fits" {
				return -1
			}
			return 1
		}
		return len(y.nodes) - len(x.nodes)
	})
	return out
}

// counts renders reason counts sorted by code: "A=1 B=2".
func counts(m map[string]int) string {
	codes := make([]string, 0, len(m))
	for code := range m {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	parts := make([]string, 0, len(codes))
	for _, code := range codes {
		parts = append(parts, fmt.Sprintf("%s=%d", code, m[code]))
	}
	return strings.Join(parts, " ")
}

// WithoutDevices drops the per-device lists, for machine-readable output of the summary.
func (r *Result) WithoutDevices() *Result {
	out := *r
	out.Explanation.Requests = slices.Clone(r.Explanation.Requests)
	for i := range out.Explanation.Requests {
		out.Explanation.Requests[i].Devices = nil
	}
	return &out
}
