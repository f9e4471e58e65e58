package engine

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draforge/draforge/engine/machine"
)

// TestTriggerMapsBeforeComparing: an update enqueues the keys the object maps to only when a
// trigger field changed, and an object that maps to no key is never compared (comparing a
// typed object converts it, the cost of every pod update on the claim machine's trigger).
func TestTriggerMapsBeforeComparing(t *testing.T) {
	path, err := machine.ParsePath("spec.nodeName", false)
	if err != nil {
		t.Fatal(err)
	}
	trig := machine.Trigger{On: []string{machine.TriggerUpdate}, Fields: []machine.Path{path}}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: node}}
	}
	var added, mapped []string
	keys := func(obj any) []string {
		name := ObjectMeta(obj).GetName()
		mapped = append(mapped, name)
		if name == "unmapped" {
			return nil
		}
		return []string{"ns/claim-of-" + name}
	}
	h := triggerHandler(trig, keys, func(k string) { added = append(added, k) })
	if h.AddFunc != nil || h.DeleteFunc != nil {
		t.Fatal("a trigger on updates only handles adds or deletes")
	}
	h.OnUpdate(pod("p", ""), pod("p", "n1"))               // bound: changed
	h.OnUpdate(pod("p", "n1"), pod("p", "n1"))             // nothing the trigger reads changed
	h.OnUpdate(pod("unmapped", ""), pod("unmapped", "n1")) // changed, but maps to no key
	if want := []string{"ns/claim-of-p"}; !slices.Equal(added, want) {
		t.Errorf("added %v, want %v", added, want)
	}
	if want := []string{"p", "p", "unmapped"}; !slices.Equal(mapped, want) {
		t.Errorf("mapped %v, want %v", mapped, want)
	}
}
