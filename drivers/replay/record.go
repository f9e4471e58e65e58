// Package replay submits a workload trace (drivers/trace) to a cluster at a compressed speed,
// through its real kube-scheduler (and Kueue when the jobs name queues), records what happened
// to every job in simulated time, and reports it (report.go: JSON, CSV and one self-contained
// HTML page). Record and report are pure; Run (run.go) does the I/O.
package replay

import (
	"time"

	"github.com/draforge/draforge/drivers/trace"
)

// Record is one replay: what was submitted and what happened, in simulated time (wall time
// since the start × speed).
type Record struct {
	Trace string  `json:"trace"`
	Run   string  `json:"run"`
	Speed float64 `json:"speed"`
	// Wall is how long the replay took.
	Wall time.Duration `json:"wall"`
	// Simulated is the simulated time the replay covered.
	Simulated time.Duration `json:"simulated"`
	// GroupBy is the node label devices are grouped by ("" for one group, "all").
	GroupBy string `json:"groupBy,omitempty"`
	// Devices are the devices published per node group (every ResourceSlice's devices).
	Devices map[string]int `json:"devices"`
	Jobs    []JobRecord    `json:"jobs"`
	Samples []Sample       `json:"samples"`
	// Faults are the faults the trace set on SimulatedDevicePools, one per device (faults.go),
	// in the trace's order.
	Faults []FaultRecord `json:"faults,omitempty"`
	// Ended says why the replay stopped: "complete", "deadline" or "stuck: ...".
	Ended string `json:"ended"`
}

// JobRecord is one job's life. Times are simulated offsets from the trace's start; a nil time
// never happened.
type JobRecord struct {
	trace.Job
	Submitted *time.Duration `json:"submitted,omitempty"`
	// Admitted is when its first pod appeared (with Kueue, once the queue admitted it).
	Admitted *time.Duration `json:"admitted,omitempty"`
	// Started is when its last pod was bound to a node: the job holds all it asked for.
	Started  *time.Duration `json:"started,omitempty"`
	Finished *time.Duration `json:"finished,omitempty"`
	Failed   bool           `json:"failed,omitempty"`
	// Reason is kube-scheduler's first word on a pod of the job that could not be placed
	// (its PodScheduled=False message), or Kueue's while it was not admitted.
	Reason string `json:"reason,omitempty"`
}

// Wait is how long the job waited from its arrival to its start, and whether it started.
func (j JobRecord) Wait() (time.Duration, bool) {
	if j.Started == nil {
		return 0, false
	}
	return *j.Started - j.Arrival, true
}

// Sample is the cluster at one simulated time.
type Sample struct {
	T time.Duration `json:"t"`
	// Allocated are the devices held by the replay's claims per node group and per class.
	AllocatedByGroup map[string]int `json:"allocatedByGroup"`
	AllocatedByClass map[string]int `json:"allocatedByClass"`
	// Pending are the replay's pods not bound to a node; Running those bound and not ended.
	Pending int `json:"pending"`
	Running int `json:"running"`
	// Free are the nodes' devices no claim of the replay holds; LargestFree the most of them
	// on one node.
	Free        int `json:"free"`
	LargestFree int `json:"largestFree"`
	// Fragmented is Free when devices were split across nodes: a pending pod that one node
	// could hold (it asks for no more than a node has), which kube-scheduler could not place
	// and whose claims are not allocated, found too few free on every node, though Free would
	// cover it. Blocked is that pod's job (the smallest such pod's), Reason
	// kube-scheduler's word on the pod (its PodScheduled=False message, as draforge explain
	// shows it).
	Fragmented int    `json:"fragmented,omitempty"`
	Blocked    string `json:"blocked,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Unavailable are the published devices with a NoSchedule or NoExecute taint, and those
	// gone from the nodes' slices since the replay began: new claims cannot get them. Free
	// counts none of them. Faults are the trace's faults in effect.
	Unavailable int `json:"unavailable,omitempty"`
	Faults      int `json:"faults,omitempty"`
}

// pendingPod is a pod of the replay not bound yet: its job, the devices it asks for and
// kube-scheduler's word on it.
type pendingPod struct {
	job     string
	devices int
	reason  string
}

// fragmentation fills s's Free, LargestFree and, when the free devices are split so that a
// pending pod one node could hold fits on none, Fragmented, Blocked and Reason. nodeDevices
// are the devices published per node, held the replay's per node.
func (s *Sample) fragmentation(nodeDevices, held map[string]int, pending []pendingPod) {
	biggest := 0
	for n, d := range nodeDevices {
		free := max(d-held[n], 0)
		s.Free += free
		s.LargestFree = max(s.LargestFree, free)
		biggest = max(biggest, d)
	}
	var blocked *pendingPod
	for i, p := range pending {
		if p.devices > s.LargestFree && p.devices <= s.Free && p.devices <= biggest &&
			(blocked == nil || p.devices < blocked.devices || p.devices == blocked.devices && p.job < blocked.job) {
			blocked = &pending[i]
		}
	}
	if blocked != nil {
		s.Fragmented, s.Blocked, s.Reason = s.Free, blocked.job, blocked.reason
	}
}
