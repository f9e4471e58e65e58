package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/engine/machine"
)

// address is a typed observation value: templates read it by its JSON field names.
type address struct {
	Host  string   `json:"host"`
	Ports []int    `json:"ports,omitempty"`
	Tags  []string `json:"tags"`
}

// TestFactValue: templates read an observation's Value as data in JSON form (typed structs by
// their JSON names, maps, lists), converted once per render; a failed observation fails the
// render with its error instead of yielding an empty value.
func TestFactValue(t *testing.T) {
	facts := &fakeFacts{facts: map[string]Fact{
		"addr":   {Holds: true, Value: address{Host: "10.0.0.1", Ports: []int{80, 443}}},
		"health": {Holds: true, Value: map[string][]string{"main": {"Healthy"}}},
		"none":   {Holds: true},
	}, errs: map[string]error{"broken": errors.New("cache not synced")}}
	in := Input{Object: &unstructured.Unstructured{Object: map[string]any{}}, Facts: facts, Now: time.Now()}
	data := TemplateData(&machine.Machine{}, in, nil)
	tpl, err := machine.CompileTemplate(map[string]any{
		"host":   `{{(.facts.Value "addr").host}}`,
		"port":   `json:{{index (.facts.Value "addr").ports 1}}`,
		"tags":   `json:{{toJSON (.facts.Value "addr").tags}}`,
		"health": `{{index (index (.facts.Value "health") "main") 0}}`,
		"none":   `{{if .facts.Value "none"}}set{{else}}nil{{end}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render(data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"host": "10.0.0.1", "port": float64(443), "tags": nil, "health": "Healthy", "none": "nil"}
	for k, v := range want {
		if got.(map[string]any)[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got.(map[string]any)[k], v)
		}
	}
	if facts.calls["addr"] != 1 {
		t.Errorf("addr observed %d times in one render, want once", facts.calls["addr"])
	}
	broken, _ := machine.CompileString(`{{(.facts.Value "broken").x}}`)
	if _, err := broken.Render(data); err == nil || !strings.Contains(err.Error(), "observation broken: cache not synced") {
		t.Errorf("render over a failed observation: %v", err)
	}
	bad := &fakeFacts{facts: map[string]Fact{"ch": {Holds: true, Value: make(chan int)}}}
	chTpl, _ := machine.CompileString(`{{.facts.Value "ch"}}`)
	if _, err := chTpl.Render(TemplateData(&machine.Machine{}, Input{Object: in.Object, Facts: bad}, nil)); err == nil ||
		!strings.Contains(err.Error(), "observation ch: value:") {
		t.Errorf("render of a value JSON cannot write: %v", err)
	}
}
