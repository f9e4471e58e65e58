// Package machine holds the decoded form of a CUE state machine (see schemas/machine.cue) and
// the loader that validates it. CUE is evaluated only at load time; the engine's hot path runs
// on these plain structs (paths parsed, templates compiled, durations read).
package machine

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
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
	// Optional: the API server may not serve Resource or let the process read it; the machine
	// then has no objects (engine.Informers.Optional).
	Optional bool
	// Selector limits the machine to objects carrying all these labels.
	Selector map[string]string
	// SelectorWithout are label keys the machine's objects must not carry.
	SelectorWithout []string
	// FieldSelector, when set, is a field selector the machine's informer lists and watches
	// with (e.g. "spec.nodeName!=": only bound pods).
	FieldSelector string
	// SelectorWhen, when set, is a test over the object alone: the machine passes over an
	// object only while it holds (checked on events and before each pass, client-side).
	SelectorWhen *Test
	// Status says what the engine may write on the object: conditions + observedGeneration.
	Status StatusPolicy
	// Triggers are other resources whose changes enqueue keys of this machine.
	Triggers []Trigger
	// Related are other objects read by name; RelatedOrder keeps declaration order.
	Related      map[string]Related
	RelatedOrder []string
	// States by name; StateOrder keeps the declaration order for rendering.
	States     map[string]State
	StateOrder []string
	// Initial is the state of an object no Derive rule matches.
	Initial string
	// Derive rules are tried in order; the first match gives the object's current state.
	Derive []DeriveRule
	// AnyState transitions are tried before each non-terminal state's own.
	AnyState []Transition
	// Outcomes maps blocked reasons to target states.
	Outcomes map[string]string
	// TerminalState is entered when an action fails with a terminal error class or runs out of retries.
	TerminalState string
	Backoff       Backoff
	Workers       int
	// HistoryLimit bounds the per-object transition history kept in memory.
	HistoryLimit int
	// NoTransitionEvents leaves out the Normal "Transition" Event of every state change.
	NoTransitionEvents bool
}

// TransitionsOf returns the transitions tried from state, in order: anyState, then its own.
// Terminal states have none.
func (m *Machine) TransitionsOf(state string) []Transition {
	st := m.States[state]
	if st.Terminal {
		return nil
	}
	if len(m.AnyState) == 0 {
		return st.On
	}
	return append(append(make([]Transition, 0, len(m.AnyState)+len(st.On)), m.AnyState...), st.On...)
}

// StatusPolicy describes what the engine writes to the object's status subresource.
type StatusPolicy struct {
	// Conditions enables writing the current state's conditions and observedGeneration.
	Conditions bool
}

// Trigger maps events on another resource to keys of the machine's resource.
type Trigger struct {
	Resource schema.GroupVersionResource
	// Map is one of: "labels" (namespace/name read from the labels below), "name" (the changed
	// object's name), "all" (every object of the machine's resource), or "driver:<name>".
	Map            string
	NameLabel      string
	NamespaceLabel string
	// Name, when set, restricts the watch to the one object with that name.
	Name string
	// On lists the changes that fire the trigger (TriggerAdd, TriggerUpdate, TriggerDelete);
	// empty means all of them.
	On []string
	// Fields, when set, lets an update fire only when one of these paths changed (e.g. a
	// Node's metadata.labels, not its heartbeat).
	Fields []Path
}

// The changes a trigger may fire on.
const (
	TriggerAdd    = "add"
	TriggerUpdate = "update"
	TriggerDelete = "delete"
)

// FiresOn reports whether a change of kind (TriggerAdd, TriggerUpdate, TriggerDelete) fires t,
// before looking at Fields.
func (t Trigger) FiresOn(kind string) bool {
	return len(t.On) == 0 || slices.Contains(t.On, kind)
}

// Changed reports whether an update from old to cur (JSON-like maps) fires t: always without
// Fields, else when the value at one of the paths differs (presence included).
func (t Trigger) Changed(old, cur map[string]any) bool {
	for _, p := range t.Fields {
		a, aok := p.Get(old)
		b, bok := p.Get(cur)
		if aok != bok || !equality.Semantic.DeepEqual(a, b) {
			return true
		}
	}
	return len(t.Fields) == 0
}

// Related is another object found by name in an informer cache.
type Related struct {
	Name     string
	Resource schema.GroupVersionResource
	// NamespaceT and NameT are templates over the object.
	NamespaceT *Template
	NameT      *Template
}

// Condition is a Kubernetes-style condition a state shows.
type Condition struct {
	Type    string
	Status  string // True, False or Unknown
	Reason  string
	Message *Template
	// When, if set, shows this entry only while the test holds.
	When *Test
}

// State is one state of the machine.
type State struct {
	Name       string
	Conditions []Condition
	Terminal   bool
	// RequeueAfter, when non-zero, re-checks an object resting in this state after that long.
	RequeueAfter time.Duration
	// On are the state's own transitions, in order.
	On []Transition
}

// Test is a predicate over an object. Exactly one kind is set.
type Test struct {
	// Observe names a driver observation.
	Observe string
	// Deleting is true when the test asks for a set metadata.deletionTimestamp.
	Deleting bool
	// Field, Label or Annotation select a value; with none of Equals, In, AtLeast the test is presence.
	Field      Path
	Label      string
	Annotation string
	Equals     any
	HasEquals  bool
	In         []any
	AtLeast    *float64
	// Condition matches a status condition.
	Condition *ConditionTest
	// Age holds when now - the timestamp at AgeField > AgeOver.
	Age      bool
	AgeField Path
	AgeOver  time.Duration
	// Exists names a related object that must be in the cache.
	Exists string
	// All and Any combine tests.
	All, Any []Test
	IsAll    bool
	IsAny    bool
	// Of tests the named related object instead of the object.
	Of string
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

// Transition leaves a state on Event when When holds and After is due.
type Transition struct {
	Event   string
	When    *Test
	After   *Timer
	To      string
	Actions []Action
}

// ActionNames lists the transition's actions for history and graphs.
func (t Transition) ActionNames() []string {
	out := make([]string, len(t.Actions))
	for i, a := range t.Actions {
		out[i] = a.String()
	}
	return out
}

// MayChangeStatus reports whether the transition's actions can change the object's status in
// memory: a status patch or a driver action (Go code given the object). Apply, finalizer,
// delete and event actions cannot, so a pass that fires only those has no status to compare.
func (t Transition) MayChangeStatus() bool {
	for _, a := range t.Actions {
		if a.Driver != "" || (a.Patch != nil && a.Patch.Status != nil) {
			return true
		}
	}
	return false
}

// ChangesObject reports whether the transition's actions may change the object in memory:
// any but apply (another object) and event actions. A pass firing only those works on the
// cached object itself, uncopied.
func (t Transition) ChangesObject() bool {
	for _, a := range t.Actions {
		if a.Apply == nil && a.Event == nil {
			return true
		}
	}
	return false
}

// Timer is due when now >= Since + Duration (or the Annotation's duration) + jitter.
type Timer struct {
	// Duration is zero for a timer set only by Annotation: an object without a valid
	// annotation has no timer (see Length).
	Duration   time.Duration
	Since      Path
	Jitter     time.Duration
	Annotation string
}

// Length is the timer's duration for an object with these annotations: the annotation's
// positive Go duration, else Duration. ok is false when there is none (an annotation-only
// timer on an object without a valid annotation): the timer never falls due.
func (t Timer) Length(annotations map[string]string) (d time.Duration, ok bool) {
	if t.Annotation != "" {
		if ad, err := time.ParseDuration(annotations[t.Annotation]); err == nil && ad > 0 {
			return ad, true
		}
	}
	return t.Duration, t.Duration > 0
}

// String describes the timer for graphs: its duration ("10s"; an annotation may override it per
// object), or the annotation that alone sets it.
func (t Timer) String() string {
	if t.Duration == 0 {
		return t.Annotation
	}
	return t.Duration.String()
}

// Action is a driver action (Driver) or exactly one generic action.
type Action struct {
	Driver    string
	Patch     *PatchAction
	Apply     *ApplyAction
	Finalizer *FinalizerAction
	Delete    bool
	// GracePeriodSeconds is the delete's grace period; nil leaves the resource's default (0
	// completes a pod's graceful deletion, as the kubelet does).
	GracePeriodSeconds *int64
	Event              *EventAction
}

func (a Action) String() string {
	switch {
	case a.Driver != "":
		return a.Driver
	case a.Patch != nil && a.Patch.Status != nil && a.Patch.Metadata != nil:
		return "patch status+metadata"
	case a.Patch != nil && a.Patch.Status != nil:
		return "patch status"
	case a.Patch != nil:
		return "patch metadata"
	case a.Apply != nil:
		return "apply " + a.Apply.Resource.Resource
	case a.Finalizer != nil && a.Finalizer.Add != "":
		return "finalizer add"
	case a.Finalizer != nil:
		return "finalizer remove"
	case a.Delete:
		return "delete"
	case a.Event != nil:
		return "event " + a.Event.Reason
	}
	return "?"
}

// PatchAction merge-patches status and/or metadata from templates.
type PatchAction struct {
	Status   *Template
	Metadata *Template
}

// ApplyAction server-side applies another object from a template.
type ApplyAction struct {
	Resource  schema.GroupVersionResource
	Namespace *Template
	Name      *Template
	Object    *Template
	// Patch, when set, is merge-patched into the object when it exists; Object is applied only
	// when it does not.
	Patch *Template
}

// FinalizerAction adds or removes one finalizer.
type FinalizerAction struct{ Add, Remove string }

// EventAction emits an Event.
type EventAction struct {
	Type, Reason string
	Message      *Template
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

// IsRetry reports whether the class is in the retry list.
func (b Backoff) IsRetry(c ErrorClass) bool {
	for _, t := range b.Retry {
		if t == c {
			return true
		}
	}
	return false
}

// TransitionCount counts the transitions as written (anyState once, plus every state's own).
func (m *Machine) TransitionCount() int {
	n := len(m.AnyState)
	for _, st := range m.States {
		n += len(st.On)
	}
	return n
}

// HasSelector reports whether the machine selects its objects (labels, absent labels or
// fields), so it lists and watches them with an informer of its own.
func (m *Machine) HasSelector() bool {
	return len(m.Selector) > 0 || len(m.SelectorWithout) > 0 || m.FieldSelector != ""
}

// LabelSelector is the machine's label selector: every Selector label and none of the
// SelectorWithout keys.
func (m *Machine) LabelSelector() labels.Selector {
	sel := labels.SelectorFromSet(m.Selector)
	for _, k := range m.SelectorWithout {
		if r, err := labels.NewRequirement(k, selection.DoesNotExist, nil); err == nil {
			sel = sel.Add(*r)
		}
	}
	return sel
}
