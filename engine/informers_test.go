package engine

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"
)

// TestDispatcherRunsFeedersFirst: whatever the registration order, a driver's store sees an
// event before any machine trigger reacts to it.
func TestDispatcherRunsFeedersFirst(t *testing.T) {
	var order []string
	h := func(name string) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { order = append(order, name) },
			UpdateFunc: func(any, any) { order = append(order, name) },
			DeleteFunc: func(any) { order = append(order, name) },
		}
	}
	d := &dispatcher{}
	d.add(h("trigger1"), false)
	d.add(h("feed1"), true)
	d.add(h("trigger2"), false)
	d.add(h("feed2"), true)
	d.OnAdd(nil, false)
	d.OnUpdate(nil, nil)
	d.OnDelete(nil)
	want := strings.Repeat("feed1,feed2,trigger1,trigger2,", 3)
	if got := strings.Join(order, ",") + ","; got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
}
