package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// env is what a test needs to talk to the cluster.
type env struct {
	Config    *rest.Config
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Namespace string
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// newEnv connects to the package cluster and creates a namespace that is deleted after the test.
func newEnv(t *testing.T) *env {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	e := &env{Config: cfg, Kube: kubernetes.NewForConfigOrDie(cfg), Dynamic: dynamic.NewForConfigOrDie(cfg)}
	name := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	e.Namespace = fmt.Sprintf("e2e-%s-%s", strings.Trim(name, "-"), rand.String(5))
	ctx := t.Context()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Kube.CoreV1().Namespaces().Delete(ctx, e.Namespace, metav1.DeleteOptions{})
	})
	return e
}

// eventually polls cond until it returns true or the timeout passes, then fails with the last message.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var msg string
	for time.Now().Before(deadline) {
		var ok bool
		if ok, msg = cond(); ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("condition not met within %s: %s", timeout, msg)
}
