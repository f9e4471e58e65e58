package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/draforge/draforge/test/cluster"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct{ method, path, watch, want string }{
		{"PATCH", "/api/v1/namespaces/wl/pods/p-1/status", "", "patch pods/status"},
		{"GET", "/api/v1/pods", "true", "watch pods"},
		{"GET", "/api/v1/pods", "", "list pods"},
		{"GET", "/api/v1/nodes/n-1", "", "get nodes"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n-1", "", "update leases"},
		{"PUT", "/apis/resource.k8s.io/v1/namespaces/wl/resourceclaims/c/status", "", "update resourceclaims/status"},
		{"POST", "/apis/resource.k8s.io/v1/resourceslices", "", "create resourceslices"},
		{"POST", "/api/v1/namespaces/wl/pods/p/binding", "", "create pods/binding"},
		{"DELETE", "/api/v1/namespaces/wl/pods", "", "deletecollection pods"},
		{"DELETE", "/api/v1/namespaces/wl/pods/p", "", "delete pods"},
		{"GET", "/api/v1/namespaces/wl", "", "get namespaces"},
		{"GET", "/apis/resource.k8s.io/v1", "", "get discovery"},
		{"GET", "/version", "", "get discovery"},
	} {
		if got := Classify(c.method, c.path, c.watch); got != c.want {
			t.Errorf("Classify(%s %s watch=%q) = %q, want %q", c.method, c.path, c.watch, got, c.want)
		}
	}
}

func TestCounts(t *testing.T) {
	before := Counts{"watch pods": 1, "update leases": 10}
	after := Counts{"watch pods": 1, "update leases": 25, "patch pods/status": 5, "get nodes": 2}
	d := after.Sub(before)
	if d.Total() != 22 || d.Writes() != 20 || len(d) != 3 {
		t.Fatalf("diff %v: total %d writes %d", d, d.Total(), d.Writes())
	}
	if s := d.String(); s != "update leases 15, patch pods/status 5, get nodes 2" {
		t.Fatalf("String() = %q", s)
	}
	// Both agents' renewals: KWOK updates Leases, the node machine patches them; a pod's status
	// patch is not a Lease request.
	mixed := Counts{"update leases": 3, "patch leases": 4, "create leases": 1, "patch pods/status": 5, "watch leases": 2}
	if n := mixed.Resource("leases"); n != 10 {
		t.Fatalf(`Resource("leases") = %d, want 10`, n)
	}
	// A subresource is a resource of its own.
	claims := Counts{"patch resourceclaims/status": 2, "get resourceclaims": 3}
	if n := claims.Resource("resourceclaims/status"); n != 2 {
		t.Fatalf(`Resource("resourceclaims/status") = %d, want 2`, n)
	}
}

func TestWorkloadRows(t *testing.T) {
	r := &WorkloadsResult{Nodes: 500, Devices: 10,
		DRAForge: &WorkloadSide{Pods: 100, Rate: 60, Wall: time.Minute, CPU: 2 * time.Second,
			Requests:     Counts{"patch pods/status": 100, "watch pods": 2, "patch leases": 3000},
			ControlPlane: map[cluster.Component]time.Duration{cluster.APIServer: 6 * time.Second, cluster.Scheduler: 3 * time.Second}},
		Kwok: &WorkloadSide{Pods: 100, Rate: 50, Wall: time.Minute, CPU: 3 * time.Second,
			Requests:     Counts{"patch pods/status": 100, "list pods": 10, "update leases": 2500},
			ControlPlane: map[cluster.Component]time.Duration{cluster.APIServer: 4 * time.Second, cluster.Scheduler: 2 * time.Second}},
	}
	rows := WorkloadRows(r)
	if len(rows) != 7 {
		t.Fatalf("%d rows", len(rows))
	}
	podWork, leases, all := rows[1], rows[2], rows[3]
	// Faster than KWOK and over the floor; fewer requests on the pods' shared work (1.02 vs 1.10),
	// Leases at the kubelet's cadence (6 per node per minute) while KWOK's fall behind; the total,
	// 31.02 vs 26.10, is reported.
	if !rows[0].OK || !rows[4].OK {
		t.Fatalf("rows %+v", rows)
	}
	if !podWork.OK || podWork.Ratio != "0.93" || podWork.Value != "1.02" || podWork.Baseline != "KWOK 1.10" {
		t.Fatalf("pod work row %+v", podWork)
	}
	if !leases.OK || leases.Value != "6.00" || leases.Ratio != "1.20" || !strings.HasPrefix(leases.Baseline, "KWOK 5.00;") {
		t.Fatalf("lease row %+v", leases)
	}
	if !all.OK || all.Target != "report" || all.Ratio != "1.19" {
		t.Fatalf("all requests row %+v", all)
	}
	// The targets bite: a claim status write per pod (which the mirrored driver never makes) or
	// other requests beyond KWOK's, Leases above the kubelet's cadence or below KWOK's.
	miss := func(mutate func(d, k Counts)) []Row {
		d, k := maps.Clone(r.DRAForge.Requests), maps.Clone(r.Kwok.Requests)
		mutate(d, k)
		rr := *r
		ds, ks := *r.DRAForge, *r.Kwok
		ds.Requests, ks.Requests = d, k
		rr.DRAForge, rr.Kwok = &ds, &ks
		return WorkloadRows(&rr)
	}
	if rows := miss(func(d, _ Counts) { d["update resourceclaims/status"] = 100 }); rows[1].OK {
		t.Fatalf("a claim status write per pod met: %+v", rows[1])
	}
	if rows := miss(func(d, _ Counts) { d["get pods"] = 20 }); rows[1].OK {
		t.Fatalf("1.22 pod requests against KWOK's 1.10 met: %+v", rows[1])
	}
	if rows := miss(func(d, _ Counts) { d["patch leases"] = 3400 }); rows[2].OK {
		t.Fatalf("6.8 Lease requests per node per minute met: %+v", rows[2])
	}
	if rows := miss(func(d, _ Counts) { d["patch leases"] = 2300 }); rows[2].OK {
		t.Fatalf("Leases behind KWOK's met: %+v", rows[2])
	}
	// The agent's CPU per pod: at most KWOK's.
	if cpu := rows[5]; !cpu.OK || cpu.Target != "<= 1.0" || cpu.Ratio != "0.67" || cpu.Value != "20.00 ms/pod (2.00 s for 100 pods)" {
		t.Fatalf("agent CPU row %+v", cpu)
	}
	slower := *r
	heavy := *r.DRAForge
	heavy.CPU = 3100 * time.Millisecond
	slower.DRAForge = &heavy
	if cpu := WorkloadRows(&slower)[5]; cpu.OK {
		t.Fatalf("31 ms of agent CPU per pod against KWOK's 30 met: %+v", cpu)
	}
	// The control plane's CPU in total and per process, in the order the processes start.
	cp := rows[6]
	if cp.Ratio != "1.50" || cp.Value != "9.0 s (kube-apiserver 6.0 s, kube-scheduler 3.0 s)" || cp.Baseline != "KWOK 6.0 s (kube-apiserver 4.0 s, kube-scheduler 2.0 s)" {
		t.Fatalf("control plane row %+v", cp)
	}
}

func TestRoundOrder(t *testing.T) {
	got := strings.Join(RoundOrder(2), " ")
	if got != "DRAForge KWOK KWOK DRAForge" {
		t.Fatalf("RoundOrder(2) = %s", got)
	}
	if got := strings.Join(RoundOrder(0), " "); got != "DRAForge KWOK" {
		t.Fatalf("RoundOrder(0) = %s", got)
	}
}

func TestCombineRuns(t *testing.T) {
	a := &WorkloadSide{Agent: "KWOK", Pods: 100, Wall: 2 * time.Second, Bound: time.Second, Rate: 50, CPU: time.Second,
		Requests: Counts{"patch pods/status": 100, "update leases": 10}, ControlPlane: map[cluster.Component]time.Duration{cluster.APIServer: time.Second}}
	b := &WorkloadSide{Agent: "KWOK", Pods: 100, Wall: 8 * time.Second, Bound: 4 * time.Second, Rate: 12.5, CPU: 3 * time.Second,
		Requests: Counts{"patch pods/status": 100, "update leases": 30}, ControlPlane: map[cluster.Component]time.Duration{cluster.APIServer: 2 * time.Second}}
	c := CombineRuns([]*WorkloadSide{a, b})
	// All pods over all windows (200 pods in 10 s), not the mean of the runs' rates (31.25).
	if c.Pods != 200 || c.Rate != 20 || c.Scheduled != 40 || c.CPU != 4*time.Second ||
		c.Requests["update leases"] != 40 || c.PerPod() != 1.2 || c.ControlPlaneTotal() != 3*time.Second {
		t.Fatalf("combined %+v", c)
	}
	if !slices.Equal(c.Runs, []float64{50, 12.5}) || runRates(c) != "; runs 50.0, 12.5" {
		t.Fatalf("runs %v %q", c.Runs, runRates(c))
	}
	// The runs are not changed.
	if a.Requests["update leases"] != 10 || a.Pods != 100 {
		t.Fatalf("run changed: %+v", a)
	}
}

func TestAllocWritesPerClaim(t *testing.T) {
	r := &AllocResult{Claims: 10, Controller: 100, Scheduler: 30,
		ControllerReqs: Counts{"update resourceclaims/status": 10, "watch pods": 2},
		SchedulerReqs:  Counts{"update resourceclaims/status": 10, "update resourceclaims": 10, "create pods/binding": 10, "list nodes": 1}}
	if r.ControllerWrites() != 100 || r.SchedulerWrites() != 90 {
		t.Fatalf("writes/s %v %v", r.ControllerWrites(), r.SchedulerWrites())
	}
}

func TestClosedWatches(t *testing.T) {
	log := `I1203 10:24:01.1 1 cache_watcher.go:214] Forcing pods watcher close due to unresponsiveness: key: "/pods", labels: "", fields: "spec.nodeName!=". len(c.input) = 10, len(c.result) = 10, graceful = false
I1203 10:24:02.1 1 cache_watcher.go:214] Forcing pods watcher close due to unresponsiveness: key: "/pods", labels: "", fields: "spec.nodeName!=". len(c.input) = 10, len(c.result) = 10, graceful = true
I1203 10:24:03.1 1 cache_watcher.go:214] Forcing resource.k8s.io/resourceclaims watcher close due to unresponsiveness: key: "/resourceclaims", labels: "", fields: "". len(c.input) = 10, len(c.result) = 10, graceful = false
I1203 10:24:04.1 1 other.go:1] unrelated`
	got := ClosedWatches(log)
	if got.Total() != 3 || got[`pods key: "/pods", labels: "", fields: "spec.nodeName!="`] != 2 {
		t.Fatalf("ClosedWatches = %v", got)
	}
}

func TestMedianOfRuns(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		runs []time.Duration
		want time.Duration
	}{
		{ms(1500), 1500 * time.Millisecond},
		{ms(2500, 1500), 2000 * time.Millisecond},
		{ms(3000, 1000, 1200), 1200 * time.Millisecond},
		{ms(4000, 1000, 1200, 1300), 1250 * time.Millisecond},
	} {
		if got := median(tc.runs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.runs, got, tc.want)
		}
	}
	runs := []controllerRun{{total: 3 * time.Second, cpu: 3}, {total: time.Second, cpu: 1}, {total: 2 * time.Second, cpu: 2}, {total: 4 * time.Second, cpu: 4}}
	if got := medianRun(runs, func(c controllerRun) time.Duration { return c.total }); got.cpu != 2 {
		t.Errorf("medianRun picked the run of %v, want the lower middle one (2s)", got.total)
	}
	r := &PublishResult{RawRuns: ms(1500, 2500, 2000), ControllerRuns: ms(1800, 1700)}
	if got := r.runsText(); got != "median of raw runs 1.50 s, 2.50 s, 2.00 s; controller runs 1.80 s, 1.70 s" {
		t.Errorf("runsText = %q", got)
	}
}

// The gangs rows: gangs/s is pods/s over the gang size; the agents' work per pod has a target.
func TestGangRows(t *testing.T) {
	r := &WorkloadsResult{Shape: GangShape(DefaultConfig()), Nodes: 500, Devices: 8,
		DRAForge: &WorkloadSide{Pods: 480, Rate: 40, Scheduled: 42, Wall: 12 * time.Second, CPU: time.Second,
			Requests: Counts{"patch pods/status": 480, "watch pods": 2, "patch leases": 1000}},
		Kwok: &WorkloadSide{Pods: 480, Rate: 48, Scheduled: 50, Wall: 10 * time.Second, CPU: time.Second,
			Requests: Counts{"patch pods/status": 480, "list pods": 10, "update leases": 800}},
	}
	rows := GangRows(r)
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	rate, work := rows[0], rows[1]
	if rate.Value != "5.00 gangs/s (40.0 pods/s, bound 42.0/s)" || rate.Baseline != "KWOK 6.00 gangs/s (48.0 pods/s, bound 50.0/s)" || rate.Ratio != "0.83" ||
		!strings.Contains(rate.Metric, "60 gangs of 8 pods x 8 devices, profile dra-all") {
		t.Errorf("rate row %+v", rate)
	}
	if !work.OK || work.Value != "1.00" || work.Baseline != "KWOK 1.02" {
		t.Errorf("work row %+v", work)
	}
	more := *r.DRAForge
	more.Requests = Counts{"patch pods/status": 480, "get pods": 480}
	r.DRAForge = &more
	if work := GangRows(r)[1]; work.OK {
		t.Errorf("2 requests per pod against KWOK's 1.02 met: %+v", work)
	}
}

// TestProxyKubeconfigsApart: two proxies made in the same directory write kubeconfigs of their
// own, each naming its own proxy (the default mode's three agents each start behind one).
func TestProxyKubeconfigsApart(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for name, b := range map[string][]byte{"admin.crt": certPEM, "ca.crt": certPEM,
		"admin.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var proxies []*CountingProxy
	for range 2 {
		p, err := NewCountingProxy(dir, "https://127.0.0.1:1", dir)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		proxies = append(proxies, p)
	}
	// Read once both exist: the second must not have replaced the first's.
	var servers []string
	for _, p := range proxies {
		cfg, err := clientcmd.LoadFromFile(p.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, cfg.Clusters["proxy"].Server)
	}
	if servers[0] == servers[1] {
		t.Fatalf("both proxies' kubeconfigs name %s", servers[0])
	}
}
