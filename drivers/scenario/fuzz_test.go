package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/drivers/simnode"
	"github.com/draforge/draforge/test/sdpparity"
)

// The fuzz inputs are checked as if read from this file: every rejection must name it.
const fuzzFile = "fuzz.yaml"

// located is one line of a rejection: "fuzz.yaml:LINE:COL: message", or, for a document
// the YAML decoder of the API machinery refuses after the schema accepted it,
// "fuzz.yaml: document N: ...".
var located = regexp.MustCompile(`^` + regexp.QuoteMeta(fuzzFile) + `:([0-9]+:[0-9]+|( document [0-9]+)): `)

// addSeeds adds every file matching the globs (relative to this package) as a seed.
func addSeeds(f *testing.F, globs ...string) {
	for _, glob := range globs {
		files, err := filepath.Glob(glob)
		if err != nil || len(files) == 0 {
			f.Fatalf("no seeds in %s", glob)
		}
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// decodeChecked runs what `draforge scenario vet/apply` and `draforge nodes apply -f` run on a
// file (Decode, then Format for the message) and checks the rejection names its location on
// every line. It returns the accepted objects, or nil when the file was rejected.
func decodeChecked(t *testing.T, src []byte) []Object {
	t.Helper()
	objs, err := Decode(fuzzFile, src, "default")
	if err == nil {
		return objs
	}
	msg := err.Error()
	var vet *VetError
	if errors.As(err, &vet) {
		msg = Format(fuzzFile, vet.Err)
	}
	if strings.TrimSpace(msg) == "" {
		t.Fatalf("rejection without a message: %#v", err)
	}
	for _, line := range strings.Split(msg, "\n") {
		if !located.MatchString(line) {
			t.Fatalf("rejection line without file:line:col: %q\nwhole message:\n%s", line, msg)
		}
	}
	return nil
}

// FuzzScenarioFile feeds arbitrary bytes as a scenario file through Decode, the path of
// `draforge scenario vet` and `scenario apply`. Seeds: every example scenario, the simulated
// nodes example, every invalid scenario and every parity-corpus file (plus testdata/fuzz).
// Invariants: no panic; every line of a rejection starts with
// fuzz.yaml:LINE:COL; what the schema accepts, the Go side accepts too (SimulatedNodes
// expand into valid Nodes, SimulatedDevicePools pass simdevice's decoding and Validate).
func FuzzScenarioFile(f *testing.F) {
	addSeeds(f, "../../examples/scenarios/*.yaml", "../../examples/simulated-nodes.yaml",
		"../../test/scenarios/invalid/*.yaml", "../../test/scenarios/sdp/*.yaml")
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, o := range decodeChecked(t, src) {
			switch o.Kind.Kind {
			case simnode.Kind:
				checkNodes(t, o)
			case simdevice.Kind:
				checkPool(t, o)
			}
		}
	})
}

// FuzzSimulatedNodes is FuzzScenarioFile seeded only with SimulatedNodes documents (the
// example, the invalid ones and the flags' rendering of `draforge nodes apply`), so the
// mutations stay near them. Every accepted document must expand into Nodes the API server
// would accept: names and the hostname label are DNS labels, labels, annotations and taints
// valid, allocatable quantities parse.
func FuzzSimulatedNodes(f *testing.F) {
	addSeeds(f, "../../examples/simulated-nodes.yaml", "../../test/scenarios/invalid/nodes-*.yaml")
	f.Add([]byte("apiVersion: draforge.oaslananka/v1alpha1\nkind: SimulatedNodes\nmetadata:\n  name: flags\nspec:\n" +
		"  prefix: gpu-node\n  count: 3\n  start: 7\n  labels: {gpu: h100}\n  taints: [{key: gpu, value: \"true\", effect: NoSchedule}]\n" +
		"  allocatable: {cpu: 96, memory: 1Ti, example.com/fpga: 2}\n  leaseRenewInterval: 10s\n  statusReportInterval: 1m30s\n"))
	f.Add([]byte("apiVersion: draforge.oaslananka/v1alpha1\nkind: SimulatedNodes\nmetadata:\n  name: topology\nspec:\n" +
		"  prefix: gpu\n  topology:\n    levels:\n      - {key: topology.kubernetes.io/zone, count: 1}\n" +
		"      - {key: topology.kubernetes.io/rack, count: 3, name: r}\n    nodesPerDomain: 2\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, o := range decodeChecked(t, src) {
			if o.Kind.Kind == simnode.Kind {
				checkNodes(t, o)
			}
		}
	})
}

// checkNodes: a SimulatedNodes document the schema accepted decodes in Go and expands into
// Nodes the API server's validation would accept.
func checkNodes(t *testing.T, o Object) {
	t.Helper()
	s, err := simnode.Decode(o.Obj)
	if err != nil {
		t.Fatalf("the schema accepted document %d, simnode.Decode refuses it: %v", o.Index, err)
	}
	nodes := s.Nodes(time.Unix(1_700_000_000, 0))
	if len(nodes) == 0 {
		t.Fatalf("document %d declares no node", o.Index)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n.Name] {
			t.Fatalf("document %d declares node %s twice", o.Index, n.Name)
		}
		seen[n.Name] = true
		md := field.NewPath("metadata")
		errs := apimachineryvalidation.ValidateObjectMeta(&n.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, md)
		errs = append(errs, metav1validation.ValidateLabels(n.Labels, md.Child("labels"))...)
		// The node's name is its kubernetes.io/hostname label (checked with the labels) and its
		// Lease's name.
		for _, e := range validation.IsDNS1123Subdomain(n.Name) {
			errs = append(errs, field.Invalid(md.Child("name"), n.Name, e))
		}
		for i, tn := range n.Spec.Taints {
			switch tn.Effect {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			default:
				errs = append(errs, field.NotSupported(field.NewPath("spec", "taints").Index(i).Child("effect"), tn.Effect, []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
			}
			for _, e := range validation.IsQualifiedName(tn.Key) {
				errs = append(errs, field.Invalid(field.NewPath("spec", "taints").Index(i).Child("key"), tn.Key, e))
			}
		}
		for k, q := range n.Status.Allocatable {
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(field.NewPath("status", "allocatable").Key(string(k)), q.String(), "must be >= 0"))
			}
		}
		if len(errs) > 0 {
			t.Fatalf("the schema accepted document %d, its node %s is invalid: %v", o.Index, n.Name, errs.ToAggregate())
		}
	}
}

// checkPool: a SimulatedDevicePool the schema accepted passes simdevice's strict decoding and
// Validate, but for the documented exceptions of the parity corpus (sdpparity.Exception: CUE
// cannot compare quantities).
func checkPool(t *testing.T, o Object) {
	t.Helper()
	p, errs := simdevice.FromUnstructuredStrict(o.Obj)
	if p != nil {
		errs = append(errs, p.Validate()...)
	}
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	if len(errs) > 0 && !sdpparity.Exception(o.Obj.Object, nil, msgs) {
		t.Fatalf("the schema accepted document %d, the Go validator refuses it: %v", o.Index, errors.Join(errs...))
	}
}
