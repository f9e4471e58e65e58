package kubeletplugin

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the plugin's own series (draforge_kubelet_plugin_*), on its private registry.
type Metrics struct {
	operations *prometheus.CounterVec
	prepared   *prometheus.GaugeVec
	registered prometheus.Gauge
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
	}
	for _, c := range []prometheus.Collector{m.operations, m.prepared, m.registered} {
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
