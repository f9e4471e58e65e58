// Package podnamespaces is the controller's --pod-namespaces: the namespaces in which it may
// write pods (create allocation pods, complete the deletion of pods on simulated nodes, write
// their status). The Helm chart grants those writes by a Role in each listed namespace instead
// of its ClusterRole (controller.podNamespaces), so a pod write elsewhere would be Forbidden:
// the drivers check first and report a pending reason naming the flag instead.
package podnamespaces

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/draforge/draforge/engine"
)

// Flag is the controller flag's name.
const Flag = "pod-namespaces"

// Reason is the pending reason of a pod write the flag does not allow.
const Reason = "PodNamespaceNotAllowed"

// Set is the parsed flag. The zero Set allows every namespace (the flag unset).
type Set struct {
	names []string // sorted, unique; empty: every namespace
}

// Parse validates the flag's values: namespace names (DNS-1123 labels), none empty, none twice.
func Parse(values []string) (Set, error) {
	var errs []error
	seen := map[string]bool{}
	for i, v := range values {
		switch msgs := validation.IsDNS1123Label(v); {
		case v == "":
			errs = append(errs, fmt.Errorf("--%s entry %d is empty", Flag, i+1))
		case len(msgs) > 0:
			errs = append(errs, fmt.Errorf("--%s entry %d %q is not a namespace name: %s", Flag, i+1, v, strings.Join(msgs, "; ")))
		case seen[v]:
			errs = append(errs, fmt.Errorf("--%s entry %d %q is given twice", Flag, i+1, v))
		}
		seen[v] = true
	}
	if len(errs) > 0 {
		return Set{}, errors.Join(errs...)
	}
	names := slices.Clone(values)
	slices.Sort(names)
	return Set{names: names}, nil
}

// All reports whether every namespace is allowed (the flag unset).
func (s Set) All() bool { return len(s.names) == 0 }

// Allows reports whether the controller may write pods in namespace.
func (s Set) Allows(namespace string) bool {
	_, found := slices.BinarySearch(s.names, namespace)
	return s.All() || found
}

// String is the flag's value, "" for every namespace.
func (s Set) String() string { return strings.Join(s.names, ",") }

// Check returns nil when namespace is allowed, else a pending error (engine.Pending, reason
// Reason) saying that what cannot be done in namespace, and which flag decides it. The flag is
// fixed for the process's life, so the key waits for its state's requeue or its next event.
func (s Set) Check(namespace, what string) error {
	if s.Allows(namespace) {
		return nil
	}
	return engine.Pending(Reason, fmt.Sprintf("%s: namespace %q is not in the controller's --%s (%s); add it there (Helm value controller.podNamespaces)",
		what, namespace, Flag, s.String()), 0)
}
