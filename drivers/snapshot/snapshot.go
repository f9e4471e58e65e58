// Package snapshot turns a cluster's DRA state (its Nodes, ResourceSlices, DeviceClasses and
// DeviceTaintRules) into scenario documents that reproduce it on the simulator: SimulatedNodes
// with the nodes' labels, taints and allocatable, and every ResourceSlice as written. It is
// pure; `draforge snapshot` lists the objects and writes the documents.
package snapshot

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/draforge/draforge/drivers/simnode"
)

// Cluster is what a snapshot reads.
type Cluster struct {
	Nodes      []corev1.Node
	Slices     []resourcev1.ResourceSlice
	Classes    []resourcev1.DeviceClass
	TaintRules []resourcev1.DeviceTaintRule
	// Namespaces are the cluster's namespace names: with Anonymize, a pool name segment equal
	// to one (DRAForge's own pools are "<namespace>/<pool>/<node>") is renamed.
	Namespaces []string
}

// Options shape the documents.
type Options struct {
	// Anonymize renames nodes (node-<i>), namespaces (ns-<i>) and slices (slice-<i>)
	// consistently wherever they appear: node labels, pool names, node selectors, the devices'
	// nodeName and the taint rules' pools. Numbered in the order of the original names.
	Anonymize bool
}

// Summary counts what the documents hold.
type Summary struct {
	Nodes, NodeDocuments, Slices, Devices, Classes, TaintRules int
}

func (s Summary) String() string {
	return fmt.Sprintf("%d nodes in %d SimulatedNodes documents, %d ResourceSlices with %d devices, %d DeviceClasses, %d DeviceTaintRules",
		s.Nodes, s.NodeDocuments, s.Slices, s.Devices, s.Classes, s.TaintRules)
}

// Document is one scenario document.
type Document = map[string]any

// Documents returns the scenario documents reproducing c, in apply order (nodes, classes,
// slices, taint rules) and sorted by name within a kind, so that equal clusters give equal
// documents.
func Documents(c Cluster, o Options) ([]Document, Summary, error) {
	r := newRenamer(c, o.Anonymize)
	var docs []Document
	var sum Summary
	groups := nodeGroups(c.Nodes, r)
	for i, g := range groups {
		docs = append(docs, g.document(i))
		sum.Nodes += len(g.names)
	}
	sum.NodeDocuments = len(groups)

	classes := slices.Clone(c.Classes)
	slices.SortFunc(classes, func(a, b resourcev1.DeviceClass) int { return cmp.Compare(a.Name, b.Name) })
	for _, cl := range classes {
		d, err := object("DeviceClass", meta(cl.Name, cl.Labels), cl.Spec)
		if err != nil {
			return nil, sum, fmt.Errorf("DeviceClass %s: %w", cl.Name, err)
		}
		docs = append(docs, d)
	}
	sum.Classes = len(classes)

	var sliceDocs []Document
	for _, s := range c.Slices {
		spec := *s.Spec.DeepCopy()
		r.slice(&spec)
		d, err := object("ResourceSlice", meta(r.sliceName(s.Name), nil), spec)
		if err != nil {
			return nil, sum, fmt.Errorf("ResourceSlice %s: %w", s.Name, err)
		}
		sliceDocs = append(sliceDocs, d)
		sum.Devices += len(spec.Devices)
	}
	slices.SortFunc(sliceDocs, func(a, b Document) int { return cmp.Compare(name(a), name(b)) })
	docs = append(docs, sliceDocs...)
	sum.Slices = len(sliceDocs)

	rules := slices.Clone(c.TaintRules)
	slices.SortFunc(rules, func(a, b resourcev1.DeviceTaintRule) int { return cmp.Compare(a.Name, b.Name) })
	for _, tr := range rules {
		spec := *tr.Spec.DeepCopy()
		// The API server stamps timeAdded when it is not given: the applied rule gets its own.
		spec.Taint.TimeAdded = nil
		if sel := spec.DeviceSelector; sel != nil && sel.Pool != nil {
			sel.Pool = new(r.pool(*sel.Pool))
		}
		d, err := object("DeviceTaintRule", meta(tr.Name, tr.Labels), spec)
		if err != nil {
			return nil, sum, fmt.Errorf("DeviceTaintRule %s: %w", tr.Name, err)
		}
		docs = append(docs, d)
	}
	sum.TaintRules = len(rules)
	return docs, sum, nil
}

// Write writes the documents as one YAML stream after header, a comment block.
func Write(w io.Writer, header string, docs []Document) error {
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		b.WriteString("# " + line + "\n")
	}
	for _, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func name(d Document) string {
	m, _ := d["metadata"].(map[string]any)
	n, _ := m["name"].(string)
	return n
}

func meta(name string, labels map[string]string) map[string]any {
	m := map[string]any{"name": name}
	if len(labels) > 0 {
		m["labels"] = labels
	}
	return m
}

// object is a resource.k8s.io/v1 document; the spec goes through its JSON form, as the API
// server would store it (opaque parameters included).
func object(kind string, metadata map[string]any, spec any) (Document, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return Document{"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": metadata, "spec": m}, nil
}

// nodeGroup is nodes that differ only in their names: one SimulatedNodes document.
type nodeGroup struct {
	names       []string
	labels      map[string]string
	taints      []corev1.Taint
	allocatable map[string]string
}

// nodeGroups groups nodes by what a SimulatedNodes document gives every node alike, without
// what the simulated node sets itself (hostname, the simulated label) or what the cluster
// sets on a node's condition (node.kubernetes.io/* taints: not-ready, unreachable...).
func nodeGroups(nodes []corev1.Node, r *renamer) []*nodeGroup {
	byKey := map[string]*nodeGroup{}
	var out []*nodeGroup
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b corev1.Node) int { return cmp.Compare(r.node(a.Name), r.node(b.Name)) })
	for _, n := range sorted {
		g := &nodeGroup{labels: map[string]string{}, allocatable: map[string]string{}}
		for k, v := range n.Labels {
			if k == corev1.LabelHostname || k == simnode.LabelSimulated {
				continue
			}
			g.labels[k] = r.node(v)
		}
		for _, t := range n.Spec.Taints {
			if strings.HasPrefix(t.Key, "node.kubernetes.io/") {
				continue
			}
			g.taints = append(g.taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
		for k, q := range n.Status.Allocatable {
			g.allocatable[string(k)] = q.String()
		}
		key, _ := json.Marshal([]any{g.labels, g.taints, g.allocatable})
		have, ok := byKey[string(key)]
		if !ok || len(have.names) >= simnode.MaxNodes {
			have = g
			byKey[string(key)] = g
			out = append(out, g)
		}
		have.names = append(have.names, r.node(n.Name))
	}
	return out
}

func (g *nodeGroup) document(i int) Document {
	spec := map[string]any{"names": g.names}
	if len(g.labels) > 0 {
		spec["labels"] = g.labels
	}
	if len(g.taints) > 0 {
		var ts []map[string]any
		for _, t := range g.taints {
			m := map[string]any{"key": t.Key, "effect": string(t.Effect)}
			if t.Value != "" {
				m["value"] = t.Value
			}
			ts = append(ts, m)
		}
		spec["taints"] = ts
	}
	if len(g.allocatable) > 0 {
		spec["allocatable"] = g.allocatable
	}
	return Document{
		"apiVersion": simnode.APIVersion, "kind": simnode.Kind,
		"metadata": map[string]any{"name": fmt.Sprintf("nodes-%d", i)},
		"spec":     spec,
	}
}

// renamer maps original names to anonymous ones (or to themselves).
type renamer struct {
	on                     bool
	nodes, spaces, sliceNm map[string]string
}

func newRenamer(c Cluster, on bool) *renamer {
	r := &renamer{on: on}
	if !on {
		return r
	}
	number := func(prefix string, names []string) map[string]string {
		names = slices.Clone(names)
		slices.Sort(names)
		names = slices.Compact(names)
		width := len(fmt.Sprint(len(names)))
		m := make(map[string]string, len(names))
		for i, n := range names {
			m[n] = fmt.Sprintf("%s-%0*d", prefix, width, i)
		}
		return m
	}
	var nodes, sliceNames []string
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Name)
	}
	// Slices may name nodes that are gone: those get names too.
	for _, s := range c.Slices {
		sliceNames = append(sliceNames, s.Name)
		if s.Spec.NodeName != nil {
			nodes = append(nodes, *s.Spec.NodeName)
		}
		for _, d := range s.Spec.Devices {
			if d.NodeName != nil {
				nodes = append(nodes, *d.NodeName)
			}
		}
	}
	r.nodes = number("node", nodes)
	r.spaces = number("ns", c.Namespaces)
	r.sliceNm = number("slice", sliceNames)
	return r
}

// rename is n's new name in m, or n. node also renames a label or selector value that is a
// node's name.
func rename(m map[string]string, n string) string {
	if v, ok := m[n]; ok {
		return v
	}
	return n
}

func (r *renamer) node(n string) string      { return rename(r.nodes, n) }
func (r *renamer) sliceName(n string) string { return rename(r.sliceNm, n) }

// pool renames the segments of a pool name that are node or namespace names.
func (r *renamer) pool(p string) string {
	if !r.on {
		return p
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if v, ok := r.nodes[s]; ok {
			segs[i] = v
		} else {
			segs[i] = rename(r.spaces, s)
		}
	}
	return strings.Join(segs, "/")
}

func (r *renamer) slice(s *resourcev1.ResourceSliceSpec) {
	if !r.on {
		return
	}
	s.Pool.Name = r.pool(s.Pool.Name)
	if s.NodeName != nil {
		s.NodeName = new(r.node(*s.NodeName))
	}
	r.selector(s.NodeSelector)
	for i := range s.Devices {
		d := &s.Devices[i]
		if d.NodeName != nil {
			d.NodeName = new(r.node(*d.NodeName))
		}
		r.selector(d.NodeSelector)
	}
}

func (r *renamer) selector(sel *corev1.NodeSelector) {
	if sel == nil {
		return
	}
	for i := range sel.NodeSelectorTerms {
		t := &sel.NodeSelectorTerms[i]
		for _, reqs := range [][]corev1.NodeSelectorRequirement{t.MatchExpressions, t.MatchFields} {
			for j := range reqs {
				for k, v := range reqs[j].Values {
					reqs[j].Values[k] = r.node(v)
				}
			}
		}
	}
}
