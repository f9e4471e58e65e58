package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/machine"
	"github.com/draforge/draforge/engine/metrics"
)

var (
	widgetGVR    = schema.GroupVersionResource{Group: "e2e.draforge.oaslananka", Version: "v1", Resource: "widgets"}
	configMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

const (
	widgetLabel   = "e2e.draforge.oaslananka/widget"
	widgetNSLabel = "e2e.draforge.oaslananka/widget-namespace"
)

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.draforge.oaslananka
spec:
  group: e2e.draforge.oaslananka
  scope: Namespaced
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                mode: {type: string}
                payload: {type: string}
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
`

// widgetDriver is the Go side of testdata/machines/widget.cue. Its fault counts survive an
// engine restart, as they belong to the test, not to one engine.
type widgetDriver struct {
	kube kubernetes.Interface
	// conflictsBeforeOK is how many Conflicts "conflict-then-ok" returns before succeeding.
	conflictsBeforeOK int

	mu        sync.Mutex
	injected  map[types.UID]int // faults returned, per widget
	informers *engine.Informers // of the running engine
}

func (d *widgetDriver) faults(uid types.UID) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.injected[uid]
}

func (d *widgetDriver) register(reg *engine.Registry) {
	reg.Observation("widgetNeedsConfigMap", func(_ context.Context, w *unstructured.Unstructured) (engine.Fact, error) {
		cm, ok := d.cachedConfigMap(w)
		return engine.Holds(!ok || cm.Data["payload"] != payloadOf(w)), nil
	})
	reg.Action("injectFault", func(_ context.Context, w *unstructured.Unstructured) error {
		mode, _, _ := unstructured.NestedString(w.Object, "spec", "mode")
		d.mu.Lock()
		defer d.mu.Unlock()
		gr := widgetGVR.GroupResource()
		switch mode {
		case "conflict-then-ok":
			if d.injected[w.GetUID()] >= d.conflictsBeforeOK {
				return nil
			}
			d.injected[w.GetUID()]++
			return apierrors.NewConflict(gr, w.GetName(), fmt.Errorf("injected conflict %d", d.injected[w.GetUID()]))
		case "always-conflict":
			d.injected[w.GetUID()]++
			return apierrors.NewConflict(gr, w.GetName(), fmt.Errorf("injected conflict %d", d.injected[w.GetUID()]))
		case "forbidden":
			d.injected[w.GetUID()]++
			return apierrors.NewForbidden(gr, w.GetName(), fmt.Errorf("injected forbidden"))
		}
		return nil
	})
	reg.Action("makeConfigMap", func(ctx context.Context, w *unstructured.Unstructured) error {
		want := map[string]string{"payload": payloadOf(w)}
		cms := d.kube.CoreV1().ConfigMaps(w.GetNamespace())
		cm, ok := d.cachedConfigMap(w)
		if !ok {
			_, err := cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: w.GetName(), Namespace: w.GetNamespace(),
					Labels: map[string]string{widgetLabel: w.GetName(), widgetNSLabel: w.GetNamespace()}},
				Data: want,
			}, metav1.CreateOptions{})
			if !apierrors.IsAlreadyExists(err) {
				return err
			}
			// Our cache is behind our own create: compare with the live object.
			if cm, err = cms.Get(ctx, w.GetName(), metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if cm.Data["payload"] == want["payload"] {
			return nil
		}
		cm = cm.DeepCopy()
		cm.Data = want
		_, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

func (d *widgetDriver) cachedConfigMap(w *unstructured.Unstructured) (*corev1.ConfigMap, bool) {
	d.mu.Lock()
	inf := d.informers
	d.mu.Unlock()
	obj, ok, err := inf.For(configMapGVR).GetStore().GetByKey(w.GetNamespace() + "/" + w.GetName())
	if err != nil || !ok {
		return nil, false
	}
	return engine.Typed[corev1.ConfigMap](obj)
}

func payloadOf(w *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(w.Object, "spec", "payload")
	return p
}

// runningEngine is one in-process engine over the widget machine.
type runningEngine struct {
	Engine  *engine.Engine
	Metrics *metrics.Metrics
	stop    func()
}

// startWidgetEngine runs the widget machine in-process like `draforge controller` runs its
// machines: informers plugin + engine plugin, a metrics observer and an event recorder.
func startWidgetEngine(t *testing.T, e *env, d *widgetDriver) *runningEngine {
	t.Helper()
	informers := engine.NewInformers(e.Dynamic)
	d.mu.Lock()
	d.informers = informers
	d.mu.Unlock()
	reg := engine.NewRegistry()
	d.register(reg)
	machines, err := machine.LoadDir("testdata/machines", reg.Names())
	if err != nil {
		t.Fatalf("load widget machine: %v", err)
	}
	m := metrics.New()
	m.InitMachines(machines)
	ctx, cancel := context.WithCancel(context.Background())
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.Kube.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "draforge-e2e"})
	log := zerolog.Nop()
	if os.Getenv("E2E_ENGINE_LOG") != "" {
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.DebugLevel)
	}
	eng, err := engine.New(engine.Options{Dynamic: e.Dynamic, Informers: informers, Registry: reg,
		Machines: machines, Recorder: recorder, Observer: m, Log: log})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- engine.RunPlugins(ctx, nil, informers.Plugin(), eng.Plugin()) }()
	var once sync.Once
	r := &runningEngine{Engine: eng, Metrics: m, stop: func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("engine: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("engine did not stop within 10s")
			}
			broadcaster.Shutdown()
		})
	}}
	t.Cleanup(r.stop)
	return r
}

// metric returns the value of the series of name whose labels include all of want (summed
// over the series that match), from a private registry.
func metric(t *testing.T, m *metrics.Metrics, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			sum += value(s)
		}
	}
	return sum
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.GetCounter().GetValue()
	case s.Gauge != nil:
		return s.GetGauge().GetValue()
	}
	return 0
}

// writes is the number of mutating API requests this process made so far (client-go's
// rest_client_requests_total, which counts every client in the process).
func writes(t *testing.T, m *metrics.Metrics) float64 {
	var n float64
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		n += metric(t, m, "rest_client_requests_total", map[string]string{"method": method})
	}
	return n
}
