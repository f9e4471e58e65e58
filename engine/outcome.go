package engine

import (
	"errors"
	"fmt"
	"time"
)

// Fact is what a driver observation answers: whether it holds, a message condition templates
// may show ({{.facts.Message "name"}}), and the data it found, which templates read as a value
// ({{(.facts.Value "name").field}}), never as JSON inside Message.
type Fact struct {
	Holds   bool
	Message string
	// Value is data for templates, e.g. a pod's addresses: any value encoding/json can write.
	// Templates see it in JSON form, as they see the object: maps keyed by the JSON field
	// names, lists, strings, float64 numbers and bools.
	Value any
	// RecheckAfter, when positive, is when the fact may change by itself, with nothing in the
	// cluster changing (e.g. a timed fault campaign's next fault): a pass that completes
	// (whichever transition it takes, or none) requeues the key after at most this long. A
	// pending, blocked or failed pass requeues on its own terms.
	RecheckAfter time.Duration
}

// Holds is a Fact without a message.
func Holds(b bool) Fact { return Fact{Holds: b} }

// PendingError tells the engine an action or observation cannot make progress yet (for
// example no device fits a claim). It is not an API error: no retry is counted; the key is
// re-checked after RequeueAfter, or the state's requeueAfter when zero.
type PendingError struct {
	Reason, Message string
	RequeueAfter    time.Duration
}

func (e *PendingError) Error() string { return "pending: " + e.Reason + ": " + e.Message }

// Pending returns a PendingError.
func Pending(reason, message string, requeueAfter time.Duration) error {
	return &PendingError{Reason: reason, Message: message, RequeueAfter: requeueAfter}
}

// BlockedError is a domain outcome: the transition cannot complete for a reason the machine
// maps to a state in CUE (outcomes: <Reason>: to: <state>). An unmapped reason keeps the
// state, like Pending.
type BlockedError struct{ Reason, Message string }

func (e *BlockedError) Error() string { return "blocked: " + e.Reason + ": " + e.Message }

// Blocked returns a BlockedError.
func Blocked(reason, message string) error { return &BlockedError{Reason: reason, Message: message} }

// Blockedf is Blocked with a formatted message.
func Blockedf(reason, format string, args ...any) error {
	return Blocked(reason, fmt.Sprintf(format, args...))
}

func asPending(err error) (*PendingError, bool) {
	var p *PendingError
	return p, errors.As(err, &p)
}

func asBlocked(err error) (*BlockedError, bool) {
	var b *BlockedError
	return b, errors.As(err, &b)
}
