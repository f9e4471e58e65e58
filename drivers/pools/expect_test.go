package pools

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/engine"
)

// TestLaggingScopesExpectationsToThePool: a pool waits only for its own writes the slice cache
// has not shown yet, and a caught-up write stops counting.
func TestLaggingScopesExpectationsToThePool(t *testing.T) {
	slices := cache.NewSharedIndexInformer(&cache.ListWatch{}, &resourcev1.ResourceSlice{}, 0, cache.Indexers{})
	d := &Driver{slices: slices, writes: &engine.Writes{}}
	d.await("pool-a", "s1", "10")
	d.await("pool-b", "s2", "20")
	if name, ok := d.lagging("pool-a"); !ok || name != "s1" {
		t.Fatalf("lagging(pool-a) = %q, %v; want s1 awaited", name, ok)
	}
	if err := slices.GetStore().Add(&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s1", ResourceVersion: "10"}}); err != nil {
		t.Fatal(err)
	}
	if name, ok := d.lagging("pool-a"); ok {
		t.Errorf("lagging(pool-a) = %q after the cache caught up", name)
	}
	if d.awaited("s1") {
		t.Error("the caught-up write is still awaited")
	}
	d.await("pool-a", "s3", "")
	if err := slices.GetStore().Add(&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s3", ResourceVersion: "30"}}); err != nil {
		t.Fatal(err)
	}
	if name, ok := d.lagging("pool-a"); !ok || name != "s3" {
		t.Errorf("lagging(pool-a) = %q, %v while the cache still shows the deleted s3", name, ok)
	}
	if _, ok := d.lagging("pool-b"); !ok {
		t.Error("pool-b's own lagging write was not reported")
	}
	if _, ok := d.lagging("pool-c"); ok {
		t.Error("a pool with no writes waits")
	}
}
