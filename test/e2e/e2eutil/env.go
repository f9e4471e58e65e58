// Package e2eutil holds the helpers the end-to-end suites (test/e2e, test/reliability) share:
// a per-test namespace on a real API server, server-side apply of YAML files, CRD
// installation, the draforge binary and its controller processes, and pool/claim waits.
// It is imported only by tests.
package e2eutil

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Env is what a test needs to talk to the cluster.
type Env struct {
	Kubeconfig string
	Config     *rest.Config
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
	Namespace  string
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// NewEnv connects to the cluster of kubeconfig and creates a namespace that is deleted after
// the test.
func NewEnv(t *testing.T, kubeconfig string) *Env {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	e := &Env{Kubeconfig: kubeconfig, Config: cfg, Kube: kubernetes.NewForConfigOrDie(cfg), Dynamic: dynamic.NewForConfigOrDie(cfg)}
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

// Eventually polls cond every 100ms until it returns true or the timeout passes, then fails
// with the last message.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
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

// RepoRoot is the module root (this file is test/e2e/e2eutil/env.go).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// IgnoreNotFound returns nil for a NotFound error.
func IgnoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
