package machines_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/draforge/draforge/drivers"
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/enginetest"
	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/machines"
	"github.com/draforge/draforge/machines/machinestest"
)

var update = flag.Bool("update", false, "rewrite testdata/<machine>/*.golden")

// TestMachines runs every built-in machine over its cases, as KWOK keeps testdata per Stage:
// testdata/<machine>/<case>.yaml is one pass's input (the object, related objects, the facts
// the drivers' observations return, now), <case>.golden the step engine.Decide takes (state,
// event, target, the actions with their templates rendered, conditions, outcome, requeue, the
// observations the pass asked for), or "selected: false" when the machine's selector.when
// leaves the object out. No cluster: the drivers are faked by the case's facts.
func TestMachines(t *testing.T) {
	names, err := drivers.Names()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range machines.Names {
		m := machinestest.Machine(t, names, name)
		cases, _ := filepath.Glob(filepath.Join("testdata", name, "*.yaml"))
		if len(cases) == 0 {
			t.Errorf("machine %s has no cases in testdata/%s", name, name)
		}
		for _, file := range cases {
			t.Run(name+"/"+strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
				got, err := run(m, names, file)
				if err != nil {
					t.Fatal(err)
				}
				golden := strings.TrimSuffix(file, ".yaml") + ".golden"
				if *update {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("the step differs from %s (run with -update):\ngot:\n%s\nwant:\n%s", golden, got, want)
				}
			})
		}
	}
}

// input is a case file. The object and related objects are decoded with integers kept as
// int64, as the informers' JSON decoder keeps them (generation, observedGeneration).
type input struct {
	Now     time.Time                  `json:"now"`
	Retries int                        `json:"retries,omitempty"`
	Object  json.RawMessage            `json:"object"`
	Related map[string]json.RawMessage `json:"related,omitempty"`
	// Facts are the drivers' observations; one not listed does not hold.
	Facts map[string]fact `json:"facts,omitempty"`
	// Blocked is what the transition's driver action reports (reason, message): the step is
	// then the one the engine takes after it (engine.BlockedStep).
	Blocked *struct{ Reason, Message string } `json:"blocked,omitempty"`
}

// fact is one observation's result. toFact is the one place that knows engine.Fact's shape.
type fact struct {
	Holds   bool   `json:"holds"`
	Message string `json:"message,omitempty"`
	// Value is the observation's typed data, as its JSON form (what templates read).
	Value any    `json:"value,omitempty"`
	Error string `json:"error,omitempty"`
}

func toFact(f fact) (engine.Fact, error) {
	var err error
	if f.Error != "" {
		err = errors.New(f.Error)
	}
	return engine.Fact{Holds: f.Holds, Message: f.Message, Value: f.Value}, err
}

// output is a golden file.
type output struct {
	From         string      `json:"from"`
	Event        string      `json:"event,omitempty"`
	To           string      `json:"to"`
	Actions      []any       `json:"actions,omitempty"`
	Conditions   []condition `json:"conditions,omitempty"`
	Outcome      string      `json:"outcome"`
	RequeueAfter string      `json:"requeueAfter,omitempty"`
	Class        string      `json:"class,omitempty"`
	Error        string      `json:"error,omitempty"`
	// Observed are the observations the pass asked for (deciding, then rendering), in order.
	Observed []string `json:"observed,omitempty"`
}

type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// run decides one case and returns its golden YAML.
func run(m *machine.Machine, names machine.Names, file string) ([]byte, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var in input
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if in.Now.IsZero() || len(in.Object) == 0 {
		return nil, fmt.Errorf("%s: a case needs now and object", file)
	}
	facts := &enginetest.Facts{Observations: map[string]engine.Fact{}, Errors: map[string]error{}, Objects: map[string]map[string]any{}}
	obj := map[string]any{}
	if err := utiljson.Unmarshal(in.Object, &obj); err != nil {
		return nil, fmt.Errorf("%s: object: %w", file, err)
	}
	for n, r := range in.Related {
		if _, ok := m.Related[n]; !ok {
			return nil, fmt.Errorf("%s: machine %s has no related object %q", file, m.Name, n)
		}
		o := map[string]any{}
		if err := utiljson.Unmarshal(r, &o); err != nil {
			return nil, fmt.Errorf("%s: related.%s: %w", file, n, err)
		}
		facts.Objects[n] = o
	}
	for n, f := range in.Facts {
		if !slices.Contains(names.Observations, n) {
			return nil, fmt.Errorf("%s: facts: no driver observes %q", file, n)
		}
		facts.Observations[n], facts.Errors[n] = toFact(f)
	}
	if !engine.Selects(m, obj) {
		// The machine's selector.when leaves the object out: the engine never passes over it.
		return yaml.Marshal(map[string]any{"selected": false})
	}
	pass := engine.Input{Object: &unstructured.Unstructured{Object: obj}, Facts: facts, Now: in.Now, Retries: in.Retries}

	st := engine.Decide(m, pass)
	var blocked *engine.BlockedError
	if in.Blocked != nil {
		if st.Transition == nil {
			return nil, fmt.Errorf("%s: blocked is set, but no transition fires", file)
		}
		blocked = &engine.BlockedError{Reason: in.Blocked.Reason, Message: in.Blocked.Message}
		st = engine.BlockedStep(m, st, blocked, pass)
	}
	out := output{From: st.From, Event: st.Event, To: st.To, Outcome: string(st.Outcome), Class: string(st.Class)}
	if st.RequeueAfter > 0 {
		out.RequeueAfter = st.RequeueAfter.String()
	}
	if st.Err != nil {
		out.Error = st.Err.Error()
	}
	for _, c := range st.Conditions {
		out.Conditions = append(out.Conditions, condition(c))
	}
	if st.Transition != nil {
		data := engine.TemplateData(m, pass, nil)
		for _, a := range st.Transition.Actions {
			r, err := render(a, data)
			if err != nil {
				return nil, fmt.Errorf("%s: action %s: %w", file, a, err)
			}
			out.Actions = append(out.Actions, r)
		}
	}
	out.Observed = facts.Asked
	return yaml.Marshal(out)
}

// render shows one action as the engine would run it, its templates rendered over the pass's
// input (a driver action's own effect on the object is not simulated).
func render(a machine.Action, data map[string]any) (any, error) {
	tmpl := func(t *machine.Template) (any, error) {
		if t == nil {
			return nil, nil
		}
		return t.Render(data)
	}
	switch {
	case a.Driver != "":
		return map[string]any{"driver": a.Driver}, nil
	case a.Patch != nil:
		status, err := tmpl(a.Patch.Status)
		if err != nil {
			return nil, err
		}
		md, err := tmpl(a.Patch.Metadata)
		if err != nil {
			return nil, err
		}
		p := map[string]any{}
		if status != nil {
			p["status"] = status
		}
		if md != nil {
			p["metadata"] = md
		}
		return map[string]any{"patch": p}, nil
	case a.Apply != nil:
		ap := map[string]any{"resource": a.Apply.Resource.GroupResource().String() + "/" + a.Apply.Resource.Version}
		for k, t := range map[string]*machine.Template{"namespace": a.Apply.Namespace, "name": a.Apply.Name,
			"object": a.Apply.Object, "patch": a.Apply.Patch} {
			v, err := tmpl(t)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if v != nil {
				ap[k] = v
			}
		}
		return map[string]any{"apply": ap}, nil
	case a.Finalizer != nil && a.Finalizer.Add != "":
		return map[string]any{"finalizer": map[string]any{"add": a.Finalizer.Add}}, nil
	case a.Finalizer != nil:
		return map[string]any{"finalizer": map[string]any{"remove": a.Finalizer.Remove}}, nil
	case a.Delete:
		d := map[string]any{}
		if a.GracePeriodSeconds != nil {
			d["gracePeriodSeconds"] = *a.GracePeriodSeconds
		}
		return map[string]any{"delete": d}, nil
	case a.Event != nil:
		msg, err := a.Event.Message.RenderString(data)
		if err != nil {
			return nil, err
		}
		return map[string]any{"event": map[string]any{"type": a.Event.Type, "reason": a.Event.Reason, "message": msg}}, nil
	}
	return nil, fmt.Errorf("empty action")
}
