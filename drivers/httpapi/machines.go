package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/engine"
)

// StateDeriver is engine.Engine's read-only State.
type StateDeriver interface {
	State(ctx context.Context, machine, key string) (string, error)
}

// EngineMachines answers machine states from an engine that serve builds over its informers
// and never runs (so it never writes), and the transition history from the controller's
// /debug/machines endpoint when ControllerURL is set: history only exists in the controller.
type EngineMachines struct {
	Engine        StateDeriver
	ControllerURL string
	HTTP          *http.Client
}

// Machine implements MachineSource.
func (m *EngineMachines) Machine(ctx context.Context, machine, namespace, name string) (*MachineView, error) {
	key := cache.ObjectName{Namespace: namespace, Name: name}.String()
	state, err := m.Engine.State(ctx, machine, key)
	if err != nil {
		return nil, err
	}
	mv := &MachineView{Machine: machine, Namespace: namespace, Name: name, State: state}
	if m.ControllerURL == "" {
		mv.HistorySource = "none"
		mv.HistoryNote = "transition history lives in the controller process; start serve with --controller-url to include it"
		return mv, nil
	}
	st, err := m.fromController(ctx, machine, namespace, name)
	if err != nil {
		mv.HistorySource = "unavailable"
		mv.HistoryNote = "the controller at --controller-url did not return the history; state derived by serve from its caches"
		return mv, nil
	}
	// The controller's state wins: it also knows terminal errors it keeps in memory.
	mv.State, mv.History, mv.HistorySource = st.State, st.History, "controller"
	if len(mv.History) == 0 {
		mv.HistoryNote = "no transitions recorded by this controller replica (it may be a standby or have restarted)"
	}
	return mv, nil
}

func (m *EngineMachines) fromController(ctx context.Context, machine, namespace, name string) (*engine.MachineStatus, error) {
	client := m.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	u := strings.TrimSuffix(m.ControllerURL, "/") + "/debug/machines/" + url.PathEscape(machine) + "/"
	if namespace != "" {
		u += url.PathEscape(namespace) + "/"
	}
	u += url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 1<<20)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("controller answered %d", resp.StatusCode)
	}
	var st engine.MachineStatus
	if err := json.NewDecoder(body).Decode(&st); err != nil {
		return nil, err
	}
	if st.State == "" {
		return nil, errors.New("controller answered no state")
	}
	return &st, nil
}
