// Package machine holds the decoded form of a CUE state machine (see schemas/machine.cue) and
// the loader that validates it. CUE is evaluated only at load time; the engine's hot path runs
// on these plain structs.
package machine

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrorClass names a class of Kubernetes API error (see engine/errclass).
type ErrorClass string

// The error classes every backoff table must place in exactly one of its lists.
const (
	Conflict              ErrorClass = "Conflict"
	AlreadyExists         ErrorClass = "AlreadyExists"
	Timeout               ErrorClass = "Timeout"
	TooManyRequests       ErrorClass = "TooManyRequests"
	ServiceUnavailable    ErrorClass = "ServiceUnavailable"
	InternalError         ErrorClass = "InternalError"
	Unknown               ErrorClass = "Unknown"
	Forbidden             ErrorClass = "Forbidden"
	Unauthorized          ErrorClass = "Unauthorized"
	Invalid               ErrorClass = "Invalid"
	BadRequest            ErrorClass = "BadRequest"
	NotFound              ErrorClass = "NotFound"
	MethodNotSupported    ErrorClass = "MethodNotSupported"
	RequestEntityTooLarge ErrorClass = "RequestEntityTooLarge"
)

// AllErrorClasses lists every class in a stable order.
var AllErrorClasses = []ErrorClass{
	Conflict, AlreadyExists, Timeout, TooManyRequests, ServiceUnavailable, InternalError, Unknown,
	Forbidden, Unauthorized, Invalid, BadRequest, NotFound, MethodNotSupported, RequestEntityTooLarge,
}

// Machine is one loaded, validated state machine.
type Machine struct {
	Name string
	// Source is the file the machine was defined in, for messages.
	Source string
	// Resource is the GVR whose objects the machine reconciles; one object is one queue key.
	Resource schema.GroupVersionResource
	// Namespaced tells whether Resource is namespaced.
	Namespaced bool
	// Status says what the engine may write on the object: conditions + observedGeneration.
	Status StatusPolicy
	// Triggers are other resources whose changes enqueue keys of this machine.
	Triggers []Trigger
	// States by name; StateOrder keeps the declaration order for rendering.
	States     map[string]State
	StateOrder []string
	// Initial is the state of an object no Derive rule matches.
	Initial string
	// Derive rules are tried in order; the first match gives the object's current state.
	Derive []DeriveRule
	// Events are tried in order; the first that matches and is permitted from the current state fires.
	Events      []Event
	Transitions []Transition
	// TerminalState is entered when an action fails with a terminal error class or runs out of retries.
	TerminalState string
	Backoff       Backoff
	Workers       int
	// HistoryLimit bounds the per-object transition history kept in memory.
	HistoryLimit int
}

// StatusPolicy describes what the engine writes to the object's status subresource.
type StatusPolicy struct {
	// Conditions enables writing the current state's conditions and observedGeneration.
	Conditions bool
}

// Trigger maps events on another resource to keys of the machine's resource.
type Trigger struct {
	Resource schema.GroupVersionResource
	// Map is one of: "labels" (namespace/name read from the labels below), "all" (every object
	// of the machine's resource), or "driver:<name>" (a driver mapper function).
	Map            string
	NameLabel      string
	NamespaceLabel string
	// Name, when set, restricts the watch to the one object with that name.
	Name string
}

// Condition is a Kubernetes-style condition a state shows.
type Condition struct {
	Type    string
	Status  string // True, False or Unknown
	Reason  string
	Message string
}

// State is one state of the machine.
type State struct {
	Name       string
	Conditions []Condition
	Terminal   bool
	// RequeueAfter, when non-zero, re-checks an object resting in this state after that long.
	RequeueAfter time.Duration
}

// Test is a predicate over an object. Exactly one of its kinds is set.
type Test struct {
	// Observe names a driver observation returning a bool.
	Observe string
	// Deleting is true when the test asks for a set metadata.deletionTimestamp.
	Deleting bool
	// Field is a dotted path into the object; with Equals it compares, otherwise it tests presence.
	Field  string
	Equals any
	// Condition matches a status condition by type and status (and reason if set), considering
	// only conditions whose observedGeneration equals metadata.generation when Current is set.
	Condition *ConditionTest
	// Not negates the test.
	Not bool
}

// ConditionTest matches one status condition.
type ConditionTest struct {
	Type    string
	Status  string
	Reason  string
	Current bool
}

// DeriveRule says: when Test holds, the object is in State.
type DeriveRule struct {
	State string
	When  Test
}

// Event is a named trigger of transitions.
type Event struct {
	Name string
	When Test
}

// Transition moves from any of From (or any state when From is ["*"]) to To on Event,
// running Actions in order.
type Transition struct {
	Event   string
	From    []string
	To      string
	Actions []string
}

// Backoff is the retry table for errors returned by actions and status writes.
type Backoff struct {
	Base       time.Duration
	Cap        time.Duration
	MaxRetries int
	Retry      []ErrorClass
	Terminal   []ErrorClass
}

// IsTerminal reports whether the class is in the terminal list.
func (b Backoff) IsTerminal(c ErrorClass) bool {
	for _, t := range b.Terminal {
		if t == c {
			return true
		}
	}
	return false
}
