package kubeletplugin

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the plugin's own series (draforge_kubelet_plugin_*), on its private registry.
type Metrics struct {
	operations *prometheus.CounterVec
	prepared   *prometheus.GaugeVec
	registered prometheus.Gauge
	refused    *prometheus.GaugeVec
	refusedNow map[refusalKey]bool // the series set by the last setRefused (the Run loop's only)
}

// NewMetrics registers the series on r.
func NewMetrics(r prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "draforge_kubelet_plugin_operations_total",
			Help: "Claims prepared and unprepared, by driver, operation (prepare, unprepare) and result (success, error)."},
			[]string{"driver", "operation", "result"}),
		prepared: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "draforge_kubelet_plugin_prepared_claims",
			Help: "Claims currently prepared on this node (in the checkpoint), by driver."}, []string{"driver"}),
		registered: prometheus.NewGauge(prometheus.GaugeOpts{Name: "draforge_kubelet_plugin_registered_drivers",
			Help: "Drivers registered with the kubelet by this process."}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "draforge_kubelet_plugin_refused_drivers",
			Help: "1 for each driver name the node's pools (or a checkpoint) want that this process refuses to serve, by driver and reason: " +
				"not-allowed (not in --driver-names), socket (another plugin's socket of that name on the node), foreign-slice " +
				"(a ResourceSlice of that driver on the node that DRAForge did not publish)."}, []string{"driver", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.operations, m.prepared, m.registered, m.refused} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(driver, op string, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.operations.WithLabelValues(driver, op, result).Inc()
}

func (m *Metrics) setPrepared(driver string, n int) {
	if m != nil {
		m.prepared.WithLabelValues(driver).Set(float64(n))
	}
}

func (m *Metrics) setRegistered(n int) {
	if m != nil {
		m.registered.Set(float64(n))
	}
}

func (m *Metrics) forget(driver string) {
	if m != nil {
		m.prepared.DeleteLabelValues(driver)
	}
}

// refusalKey is one series of draforge_kubelet_plugin_refused_drivers.
type refusalKey struct {
	driver string
	reason refusalReason
}

// setRefused makes the refused series exactly now's: new ones set, gone ones deleted (never
// all reset first, so a scrape never sees a refusal vanish and come back).
func (m *Metrics) setRefused(now []refusalKey) {
	if m == nil {
		return
	}
	next := map[refusalKey]bool{}
	for _, k := range now {
		next[k] = true
		m.refused.WithLabelValues(k.driver, string(k.reason)).Set(1)
	}
	for k := range m.refusedNow {
		if !next[k] {
			m.refused.DeleteLabelValues(k.driver, string(k.reason))
		}
	}
	m.refusedNow = next
}
