package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/draforge/draforge/engine"
)

type fakeDeriver map[string]string

func (f fakeDeriver) State(_ context.Context, m, key string) (string, error) {
	if m != "claim" && m != "node" {
		return "", engine.ErrUnknownMachine
	}
	if s, ok := f[key]; ok {
		return s, nil
	}
	return "", engine.ErrObjectNotFound
}

func TestEngineMachines(t *testing.T) {
	d := fakeDeriver{"demo/used": "allocated", "sim-node-0": "ready"}
	ctrl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debug/machines/node/sim-node-0" {
			_ = json.NewEncoder(w).Encode(engine.MachineStatus{Machine: "node", Name: "sim-node-0", State: "ready",
				History: []engine.Record{{Time: time.Unix(1, 0), From: "unknown", To: "ready", Event: "heartbeat", Outcome: "ok"}}})
			return
		}
		if r.URL.Path != "/debug/machines/claim/demo/used" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(engine.MachineStatus{Machine: "claim", Namespace: "demo", Name: "used", State: "allocated",
			History: []engine.Record{{Time: time.Unix(1, 0), From: "pending", To: "allocated", Event: "allocate", Outcome: "ok"}}})
	}))
	defer ctrl.Close()
	ctx := context.Background()

	mv, err := (&EngineMachines{Engine: d}).Machine(ctx, "claim", "demo", "used")
	if err != nil || mv.State != "allocated" || mv.HistorySource != "none" || mv.History != nil || mv.HistoryNote == "" {
		t.Errorf("without controller: %+v %v", mv, err)
	}
	mv, err = (&EngineMachines{Engine: d, ControllerURL: ctrl.URL + "/"}).Machine(ctx, "claim", "demo", "used")
	if err != nil || mv.HistorySource != "controller" || len(mv.History) != 1 || mv.History[0].Event != "allocate" {
		t.Errorf("with controller: %+v %v", mv, err)
	}
	mv, err = (&EngineMachines{Engine: d, ControllerURL: "http://127.0.0.1:1"}).Machine(ctx, "claim", "demo", "used")
	if err != nil || mv.HistorySource != "unavailable" || mv.State != "allocated" || mv.History != nil {
		t.Errorf("controller down: %+v %v", mv, err)
	}
	// A cluster-scoped machine's history is asked for without a namespace segment.
	mv, err = (&EngineMachines{Engine: d, ControllerURL: ctrl.URL}).Machine(ctx, "node", "", "sim-node-0")
	if err != nil || mv.HistorySource != "controller" || len(mv.History) != 1 || mv.State != "ready" {
		t.Errorf("cluster-scoped with controller: %+v %v", mv, err)
	}
	if _, err := (&EngineMachines{Engine: d}).Machine(ctx, "claim", "demo", "nope"); !errors.Is(err, engine.ErrObjectNotFound) {
		t.Errorf("missing object: %v", err)
	}
	if _, err := (&EngineMachines{Engine: d}).Machine(ctx, "nope", "demo", "used"); !errors.Is(err, engine.ErrUnknownMachine) {
		t.Errorf("unknown machine: %v", err)
	}
}
