package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/engine/machine"
)

// Action does the work of a transition. It may change obj's status in memory (obj is a private
// copy); the engine writes status back only when it changed. Returning Pending keeps the object
// in its state without counting a retry; Blocked goes where the machine's outcomes say.
type Action func(ctx context.Context, obj *unstructured.Unstructured) error

// Observation answers a yes/no question about facts outside the object (the allocator, other
// objects) from informer caches; its message is available to condition templates.
type Observation func(ctx context.Context, obj *unstructured.Unstructured) (Fact, error)

// Mapper turns a changed object of a trigger resource into keys of a machine's resource. obj is
// *unstructured.Unstructured, or a typed or Compact object for resources cached typed (see
// Informers.CacheTyped); engine.Typed converts any of them. It must not be mutated.
type Mapper func(obj metav1.Object) []cache.ObjectName

// Registry holds the driver functions machines call by name.
type Registry struct {
	actions      map[string]Action
	observations map[string]Observation
	mappers      map[string]Mapper
	// pruned are the caches the drivers prune, for the loader's check of what machines read.
	pruned []machine.Pruned
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{actions: map[string]Action{}, observations: map[string]Observation{}, mappers: map[string]Mapper{}}
}

// Action registers an action; a second registration of a name panics, as it is a programming error.
func (r *Registry) Action(name string, fn Action) { register(r.actions, "action", name, fn) }

// Observation registers an observation.
func (r *Registry) Observation(name string, fn Observation) {
	register(r.observations, "observation", name, fn)
}

// Mapper registers a trigger mapper.
func (r *Registry) Mapper(name string, fn Mapper) { register(r.mappers, "mapper", name, fn) }

func register[F any](m map[string]F, kind, name string, fn F) {
	if _, dup := m[name]; dup {
		panic(fmt.Sprintf("engine: %s %q registered twice", kind, name))
	}
	m[name] = fn
}

// Pruned declares a cache that drops fields of its objects (Informers.CacheTyped's shrink,
// Selectable's Full): machines that read a field it drops fail to load, naming the field.
func (r *Registry) Pruned(p machine.Pruned) { r.pruned = append(r.pruned, p) }

// Names lists what is registered, for the machine loader's validation.
func (r *Registry) Names() machine.Names {
	return machine.Names{Actions: keys(r.actions), Observations: keys(r.observations), Mappers: keys(r.mappers),
		Pruned: slices.Clone(r.pruned)}
}

func keys[F any](m map[string]F) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// mapperName strips the "driver:" prefix of a trigger's map.
func mapperName(m string) (string, bool) { return strings.CutPrefix(m, "driver:") }
