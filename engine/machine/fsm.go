package machine

import "github.com/looplab/fsm"

// NewFSM returns a looplab/fsm FSM in state current with one event per transition and no
// callbacks: the engine runs actions itself, so an FSM is cheap and never kept between passes.
// A transition whose target equals the current state makes Event return fsm.NoTransitionError.
func (m *Machine) NewFSM(current string) *fsm.FSM {
	events := make(fsm.Events, 0, len(m.Transitions))
	for _, t := range m.Transitions {
		events = append(events, fsm.EventDesc{Name: t.Event, Src: t.From, Dst: t.To})
	}
	return fsm.NewFSM(current, events, nil)
}
