package engine

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/draforge/draforge/engine/machine"
)

// Reader derives machine states from the informer caches with the pure Derive step, for
// read-only processes (draforge serve): it creates no queue, registers no driver, runs no
// action and never writes. It watches each machine's own objects and only the related
// objects its derive rules read. Unlike the controller it knows no terminal mark kept in a
// controller's memory nor retry counts, so a machine whose terminal state lives only there
// derives as its status shows.
type Reader struct {
	machines map[string]*readMachine
	// Now is the clock for age tests; nil means time.Now.
	Now func() time.Time
}

type readMachine struct {
	m       *machine.Machine
	own     *own
	related map[string]relatedRef
}

// NewReader creates the informers the machines' derive rules read (call before the informers
// start).
func NewReader(inf *Informers, machines []*machine.Machine) (*Reader, error) {
	r := &Reader{machines: map[string]*readMachine{}}
	for _, m := range machines {
		own, err := ownObjects(inf, m)
		if err != nil {
			return nil, err
		}
		rm := &readMachine{m: m, own: own, related: map[string]relatedRef{}}
		for _, n := range deriveRelated(m) {
			rel, ok := m.Related[n]
			if !ok {
				return nil, fmt.Errorf("machine %s: derive reads unknown related object %q", m.Name, n)
			}
			rm.related[n] = relatedRef{spec: rel, inf: RelatedInformer(inf, rel)}
		}
		r.machines[m.Name] = rm
	}
	return r, nil
}

// State derives the current state of the cached object with key ("namespace/name", or the
// name of a cluster-scoped object).
func (r *Reader) State(_ context.Context, machineName, key string) (string, error) {
	rm, ok := r.machines[machineName]
	if !ok {
		return "", fmt.Errorf("%w %q", ErrUnknownMachine, machineName)
	}
	u, exists, err := rm.own.get(key)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", machineName, key, err)
	}
	if !exists {
		return "", fmt.Errorf("%s %s: %w", machineName, key, ErrObjectNotFound)
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	return Derive(rm.m, Input{Object: u, Facts: readFacts{rm: rm, obj: u}, Now: now()})
}

// readFacts are the Facts of a derivation without drivers: related objects from the caches;
// observations are the drivers' and cannot be made here.
type readFacts struct {
	rm  *readMachine
	obj *unstructured.Unstructured
}

func (f readFacts) Observe(name string) (Fact, error) {
	return Fact{}, fmt.Errorf("observation %q needs the controller's drivers (derive from the object instead)", name)
}

func (f readFacts) Related(name string) map[string]any {
	rel, ok := f.rm.related[name]
	if !ok {
		return nil
	}
	key, ok := rel.key(f.obj)
	if !ok {
		return nil
	}
	o, exists, _ := rel.inf.GetStore().GetByKey(key)
	if !exists {
		return nil
	}
	return asMap(o)
}

// deriveRelated lists the related objects m's derive rules read (of, exists), once each.
func deriveRelated(m *machine.Machine) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(t machine.Test)
	walk = func(t machine.Test) {
		for _, n := range []string{t.Of, t.Exists} {
			if n != "" && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
		for _, c := range append(append([]machine.Test{}, t.All...), t.Any...) {
			walk(c)
		}
	}
	for _, d := range m.Derive {
		walk(d.When)
	}
	return out
}
