package machine

import "github.com/looplab/fsm"

// FSMEvents describes the machine to looplab/fsm: one event per (state, transition), from that
// state to the transition's target. The engine builds an FSM in the derived state each pass
// (state is level-based, never kept) and fires the chosen event through it, so the
// transition's actions run in its callbacks. Event names are unique per state (checked at
// load), which is what looplab/fsm requires.
func (m *Machine) FSMEvents() fsm.Events {
	var events fsm.Events
	for _, n := range m.StateOrder {
		for _, t := range m.TransitionsOf(n) {
			events = append(events, fsm.EventDesc{Name: t.Event, Src: []string{n}, Dst: t.To})
		}
	}
	return events
}
