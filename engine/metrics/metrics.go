// Package metrics is the engine's metrics plugin: a private Prometheus registry with the
// draforge_controller_* series of the operations guide, per-machine transition counters, and
// client-go's rest_client_requests_total so API cost is attributed client-side.
package metrics

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientmetrics "k8s.io/client-go/tools/metrics"

	"github.com/draforge/draforge/engine/machine"
)

// MachineLabel is the label that names the machine on every series that has one: "pipeline",
// the name the operations guide gives it (draforge_controller_sync_attempts_total{pipeline=...}),
// with the machine's name as its value.
const MachineLabel = "pipeline"

// Metrics implements engine.Observer over a private registry.
type Metrics struct {
	Registry *prometheus.Registry

	Leader          prometheus.Gauge
	reconcileErrors *prometheus.CounterVec
	retries         *prometheus.CounterVec
	terminal        *prometheus.CounterVec
	syncAttempts    *prometheus.CounterVec
	syncSeconds     *prometheus.CounterVec
	syncDuration    *prometheus.HistogramVec
	inFlight        *prometheus.GaugeVec
	queueDepth      *prometheus.GaugeVec
	transitions     *prometheus.CounterVec
	// RESTRequests is client-go's rest_client_requests_total{code,method,host}.
	RESTRequests *prometheus.CounterVec
}

// New registers every series on a private registry.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "draforge_controller_leader",
			Help: "1 on the replica holding the leader Lease, 0 on standby replicas."}),
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "draforge_controller_reconcile_errors_total",
			Help: "Synchronization attempts that returned an error."}, []string{MachineLabel}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "draforge_controller_reconcile_retries_total",
			Help: "Rate-limited retries scheduled by the queue policy."}, []string{MachineLabel, "class"}),
		terminal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "draforge_controller_terminal_errors_total",
			Help: "Errors forgotten immediately or after the retry limit."}, []string{MachineLabel, "class"}),
		syncAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "draforge_controller_sync_attempts_total",
			Help: "Synchronizations started."}, []string{MachineLabel}),
		syncSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "draforge_controller_sync_duration_seconds_total",
			Help: "Cumulative synchronization time."}, []string{MachineLabel}),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "draforge_controller_sync_duration_seconds",
			Help: "Synchronization latency.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{MachineLabel}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "draforge_controller_sync_in_flight",
			Help: "Synchronization workers currently executing."}, []string{MachineLabel}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "draforge_controller_queue_depth",
			Help: "Ready items waiting in each workqueue; delayed retries are not included until ready."}, []string{MachineLabel}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "draforge_controller_transitions_total",
			Help: "State machine transitions fired, by machine, source and target state and event."}, []string{MachineLabel, "from", "to", "event"}),
		RESTRequests: newRESTRequests(),
	}
	r.MustRegister(m.Leader, m.reconcileErrors, m.retries, m.terminal, m.syncAttempts, m.syncSeconds, m.syncDuration,
		m.inFlight, m.queueDepth, m.transitions, m.RESTRequests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	routeClientGo(m.RESTRequests)
	return m
}

// InitMachines creates the series of every machine and error class at zero, so they are
// visible in /metrics before the first event.
func (m *Metrics) InitMachines(machines []*machine.Machine) {
	for _, mc := range machines {
		for _, v := range []*prometheus.CounterVec{m.reconcileErrors, m.syncAttempts, m.syncSeconds} {
			v.WithLabelValues(mc.Name)
		}
		m.inFlight.WithLabelValues(mc.Name)
		m.queueDepth.WithLabelValues(mc.Name)
		for _, c := range mc.Backoff.Retry {
			m.retries.WithLabelValues(mc.Name, string(c))
		}
		for _, c := range machine.AllErrorClasses {
			m.terminal.WithLabelValues(mc.Name, string(c))
		}
	}
}

// SyncStarted implements engine.Observer.
func (m *Metrics) SyncStarted(p string) {
	m.syncAttempts.WithLabelValues(p).Inc()
	m.inFlight.WithLabelValues(p).Inc()
}

// SyncFinished implements engine.Observer.
func (m *Metrics) SyncFinished(p string, took time.Duration, err error) {
	m.inFlight.WithLabelValues(p).Dec()
	m.syncSeconds.WithLabelValues(p).Add(took.Seconds())
	m.syncDuration.WithLabelValues(p).Observe(took.Seconds())
	if err != nil {
		m.reconcileErrors.WithLabelValues(p).Inc()
	}
}

// Retry implements engine.Observer.
func (m *Metrics) Retry(p string, c machine.ErrorClass) {
	m.retries.WithLabelValues(p, string(c)).Inc()
}

// Terminal implements engine.Observer.
func (m *Metrics) Terminal(p string, c machine.ErrorClass) {
	m.terminal.WithLabelValues(p, string(c)).Inc()
}

// Transition implements engine.Observer.
func (m *Metrics) Transition(mc, from, to, event string) {
	m.transitions.WithLabelValues(mc, from, to, event).Inc()
}

// QueueDepth implements engine.Observer.
func (m *Metrics) QueueDepth(p string, n int) { m.queueDepth.WithLabelValues(p).Set(float64(n)) }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

func newRESTRequests() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
		Help: "Number of HTTP requests made by client-go, partitioned by status code, method, and host."}, []string{"code", "method", "host"})
}

// RegisterRESTClient registers client-go's rest_client_requests_total{code,method,host} on r
// and routes this process's client-go request results into it, for processes other than the
// controller (draforge serve) that want API cost attributed without the controller series.
func RegisterRESTClient(r prometheus.Registerer) (*prometheus.CounterVec, error) {
	v := newRESTRequests()
	if err := r.Register(v); err != nil {
		return nil, err
	}
	routeClientGo(v)
	return v, nil
}

// client-go accepts one registration per process; later Metrics values share the first
// counter's series through this indirection so tests can build several.
var (
	clientGoOnce sync.Once
	clientGoMu   sync.RWMutex
	clientGoVecs []*prometheus.CounterVec
)

func routeClientGo(v *prometheus.CounterVec) {
	clientGoMu.Lock()
	clientGoVecs = append(clientGoVecs, v)
	clientGoMu.Unlock()
	clientGoOnce.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: requestResult{}})
	})
}

type requestResult struct{}

func (requestResult) Increment(_ context.Context, code, method, host string) {
	clientGoMu.RLock()
	defer clientGoMu.RUnlock()
	for _, v := range clientGoVecs {
		v.WithLabelValues(code, method, host).Inc()
	}
}
