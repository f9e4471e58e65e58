package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ChurnResult is the create-to-allocation latency of claims created and deleted continuously.
type ChurnResult struct {
	Rate     float64
	Duration time.Duration
	Samples  int
	P50, P99 time.Duration
	Max      time.Duration
}

// Churn runs a controller and, for d, creates rate claims/s (class bench-alloc); every claim
// is deleted as soon as it is seen allocated. Latency is from just before the create call to
// the watch event showing status.allocation.
func (e *Env) Churn(ctx context.Context, rate float64, d time.Duration) (*ChurnResult, error) {
	ns := "bench-churn"
	if err := e.Namespace(ctx, ns); err != nil {
		return nil, err
	}
	ctl, err := e.StartController(ctx)
	if err != nil {
		return nil, err
	}
	defer ctl.Stop()
	if err := ctl.Quiesce(ctx, time.Second, time.Minute); err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		created = map[string]time.Time{}
		lat     []time.Duration
	)
	deletes := make(chan string, 10000)
	w := e.watchClaims(ctx, ns, func(c *resourcev1.ResourceClaim) {
		now := time.Now()
		mu.Lock()
		if t, ok := created[c.Name]; ok {
			lat = append(lat, now.Sub(t))
		}
		mu.Unlock()
		deletes <- c.Name
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		for name := range deletes {
			_ = e.Setup.ResourceV1().ResourceClaims(ns).Delete(ctx, name, metav1.DeleteOptions{})
		}
	})
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	end := time.Now().Add(d)
	n := 0
	for time.Now().Before(end) {
		<-tick.C
		name := fmt.Sprintf("churn-%05d", n)
		n++
		mu.Lock()
		created[name] = time.Now()
		mu.Unlock()
		go func() {
			if _, err := e.Setup.ResourceV1().ResourceClaims(ns).Create(ctx, Claim(ns, name, "bench-alloc"), metav1.CreateOptions{}); err != nil {
				fmt.Fprintln(e.Log, "bench: churn create:", err)
			}
		}()
	}
	tick.Stop()
	err = w.wait(ctx, n, time.Minute)
	close(deletes)
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("churn: %w\n%s", err, tail(ctl.Log, 20))
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	res := &ChurnResult{Rate: rate, Duration: d, Samples: len(lat), P50: quantile(lat, 0.50), P99: quantile(lat, 0.99), Max: lat[len(lat)-1]}
	fmt.Fprintf(e.Log, "bench: churn %d claims at %.0f/s: p50 %s p99 %s max %s\n", res.Samples, rate, res.P50.Round(time.Microsecond*100), res.P99.Round(time.Microsecond*100), res.Max.Round(time.Millisecond))
	return res, nil
}

// quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
