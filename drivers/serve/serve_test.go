package serve

import (
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/draforge/draforge/drivers/process"
	"github.com/draforge/draforge/engine"
)

// queueCounter records the name of every named workqueue created in this process (the engine
// names one per machine).
type queueCounter struct {
	mu    sync.Mutex
	names []string
}

func (q *queueCounter) created() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.names)
}

func (q *queueCounter) NewDepthMetric(name string) workqueue.GaugeMetric {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.names = append(q.names, name)
	return noopMetric{}
}
func (*queueCounter) NewAddsMetric(string) workqueue.CounterMetric { return noopMetric{} }
func (*queueCounter) NewLatencyMetric(string) workqueue.HistogramMetric {
	return noopMetric{}
}
func (*queueCounter) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return noopMetric{}
}
func (*queueCounter) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noopMetric{}
}
func (*queueCounter) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noopMetric{}
}
func (*queueCounter) NewRetriesMetric(string) workqueue.CounterMetric { return noopMetric{} }

type noopMetric struct{}

func (noopMetric) Inc()            {}
func (noopMetric) Dec()            {}
func (noopMetric) Set(float64)     {}
func (noopMetric) Observe(float64) {}

// TestServeProcessIsReadOnly builds serve as `draforge serve` does (nothing is started,
// no API server is needed) and checks that it creates no work queue and registers no driver,
// while building the controller's engine from the same machines creates one queue per
// machine (so the count would catch an engine in serve).
func TestServeProcessIsReadOnly(t *testing.T) {
	counter := &queueCounter{}
	workqueue.SetProvider(counter)
	// A server nothing listens on: nothing is started, so nothing is asked of it.
	cfg := func() *rest.Config { return &rest.Config{Host: "https://127.0.0.1:1", BearerToken: "t"} }
	s, err := New(cfg(), Options{Addr: "127.0.0.1:0", Process: process.Options{LogLevel: "error", QPS: 20, Burst: 40},
		ReadyTimeout: time.Second, ReadyGrace: time.Second, ShutdownWithin: time.Second,
		DoctorInterval: time.Hour, SnapshotInterval: time.Second, Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := counter.created(); len(got) != 0 {
		t.Errorf("serve created work queues %v", got)
	}
	if s.Registry != nil || s.Drivers != nil {
		t.Error("serve registered drivers")
	}
	if len(s.Machines) == 0 || len(s.Plugins) != 4 {
		t.Errorf("serve: %d machines, %d plugins", len(s.Machines), len(s.Plugins))
	}

	// The controller: its drivers' sweeper and the engine (one queue per machine).
	rt, err := process.New(cfg(), process.Options{Component: "controller", LogLevel: "error"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.New(engine.Options{Dynamic: rt.Dynamic, Informers: rt.Informers, Registry: rt.Registry, Machines: rt.Machines}); err != nil {
		t.Fatal(err)
	}
	got := counter.created()
	slices.Sort(got)
	want := []string{"orphan-slices"} // the pool driver's sweeper
	for _, m := range rt.Machines {
		want = append(want, m.Name)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("controller queues %v, want %v", got, want)
	}
}
