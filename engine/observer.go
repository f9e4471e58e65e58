package engine

import (
	"time"

	"github.com/draforge/draforge/engine/machine"
)

// Observer receives the engine's measurements; the metrics plugin implements it. Labels are
// machine, state and event names declared in CUE, so their cardinality is bounded.
type Observer interface {
	SyncStarted(machine string)
	SyncFinished(machine string, took time.Duration, err error)
	Retry(machine string, class machine.ErrorClass)
	Terminal(machine string, class machine.ErrorClass)
	Transition(machine, from, to, event string)
	QueueDepth(machine string, depth int)
}

type nopObserver struct{}

func (nopObserver) SyncStarted(string)                        {}
func (nopObserver) SyncFinished(string, time.Duration, error) {}
func (nopObserver) Retry(string, machine.ErrorClass)          {}
func (nopObserver) Terminal(string, machine.ErrorClass)       {}
func (nopObserver) Transition(string, string, string, string) {}
func (nopObserver) QueueDepth(string, int)                    {}
