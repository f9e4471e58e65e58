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

	"github.com/draforge/draforge/cmd/draforge/internal/inventory"
	"github.com/draforge/draforge/drivers/allocator"
	"github.com/draforge/draforge/drivers/compactslice"
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
	r.Explanation = NewAllocator(s).Explain(ctx, claim)
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

// Render writes a human-readable explanation.
func Render(w io.Writer, r *Result) error {
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
		b.WriteString("\nNodes:\n")
		for _, n := range ex.Nodes {
			verdict := "does not fit"
			if n.Fits {
				verdict = "fits"
			}
			fmt.Fprintf(&b, "  %-12s %s: %s\n", n.Node, verdict, n.Summary)
		}
	}
	if len(ex.Remedies) > 0 {
		b.WriteString("\nRemedies:\n")
		for _, rem := range ex.Remedies {
			fmt.Fprintf(&b, "  - %s\n", rem)
		}
	}
	if len(r.ReasonCounts) > 0 {
		codes := make([]string, 0, len(r.ReasonCounts))
		for code := range r.ReasonCounts {
			codes = append(codes, code)
		}
		slices.Sort(codes)
		var parts []string
		for _, code := range codes {
			parts = append(parts, fmt.Sprintf("%s=%d", code, r.ReasonCounts[code]))
		}
		fmt.Fprintf(&b, "\nReasons: %s\n", strings.Join(parts, " "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
