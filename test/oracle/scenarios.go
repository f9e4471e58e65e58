package oracle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simnode"
)

func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func into[T any](u *unstructured.Unstructured) (*T, error) {
	var t T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &t); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return &t, nil
}

// ScenarioCases turns every scenario of dir into a world (its pools' slices on the nodes of
// nodesFile (examples/simulated-nodes.yaml), as the controller publishes them, and its
// DeviceClasses renamed per scenario so scenarios do not collide) and a case per
// ResourceClaim. Each claim is decided on its own against the scenario's empty devices: a scenario's expected outcomes (some claims pending
// because others took the devices first) depend on order, the verdict per claim does not.
func ScenarioCases(dir, nodesFile string) (cases []Case, skipped []string, err error) {
	nodeDocs, err := decodeFile(nodesFile)
	if err != nil {
		return nil, nil, err
	}
	// The nodes the scenarios use: SimulatedNodes documents (as `draforge scenario apply`
	// creates them) or plain Nodes.
	var nodes []*corev1.Node
	for _, u := range nodeDocs {
		if u.GetKind() == "Node" {
			n, err := into[corev1.Node](u)
			if err != nil {
				return nil, nil, err
			}
			nodes = append(nodes, n)
			continue
		}
		spec, err := simnode.Decode(u)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", nodesFile, err)
		}
		nodes = append(nodes, spec.Nodes(time.Now())...)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(files)
	for k, file := range files {
		docs, err := decodeFile(file)
		if err != nil {
			return nil, nil, err
		}
		w := &World{Name: filepath.Base(file)}
		prefix := fmt.Sprintf("sc%02d-", k)
		byNode := map[string][]*resourcev1.ResourceSlice{}
		var claims []*resourcev1.ResourceClaim
		unbound := false
		for _, u := range docs {
			switch u.GetKind() {
			case simdevice.Kind:
				p, err := simdevice.FromUnstructured(u)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %w", file, err)
				}
				slices, err := simdevice.DesiredSlices(p, nodes)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %w", file, err)
				}
				for _, s := range slices {
					n := ptr.Deref(s.Spec.NodeName, "")
					if n == "" {
						// Per-device node selection: the oracle copies node-local slices only.
						unbound = true
						continue
					}
					byNode[n] = append(byNode[n], s)
				}
			case "DeviceClass":
				c, err := into[resourcev1.DeviceClass](u)
				if err != nil {
					return nil, nil, err
				}
				c.Name = prefix + c.Name
				w.Classes = append(w.Classes, c)
			case "ResourceClaim":
				c, err := into[resourcev1.ResourceClaim](u)
				if err != nil {
					return nil, nil, err
				}
				claims = append(claims, c)
			}
		}
		if unbound {
			skipped = append(skipped, filepath.Base(file)+": a pool publishes slices not bound to one node (per-device node selection)")
			continue
		}
		for _, n := range nodes {
			if s := byNode[n.Name]; len(s) > 0 {
				w.Templates = append(w.Templates, Template{Node: n, Slices: s})
			}
		}
		if len(w.Templates) == 0 {
			continue
		}
		for _, c := range claims {
			c = c.DeepCopy()
			for i := range c.Spec.Devices.Requests {
				r := &c.Spec.Devices.Requests[i]
				if r.Exactly != nil {
					r.Exactly.DeviceClassName = prefix + r.Exactly.DeviceClassName
				}
				for j := range r.FirstAvailable {
					r.FirstAvailable[j].DeviceClassName = prefix + r.FirstAvailable[j].DeviceClassName
				}
			}
			cases = append(cases, Case{ID: w.Name + "/" + c.Name, World: w, Claim: c})
		}
	}
	return cases, skipped, nil
}
