package cli

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/draforge/draforge/drivers/inventory"
)

// clients are the API clients of one diagnostic command.
type clients struct {
	cfg *rest.Config
	inventory.Clients
}

// clients connects with --request-timeout applied to every request. Cancelling the command's
// context (Ctrl-C) aborts requests in flight.
func (k *kubeFlags) clients() (*clients, error) {
	cfg, err := k.config()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = k.requestTimeout
	// kubectl's client limits (client-go's own 5 QPS would make `nodes apply --count 1000`
	// take minutes).
	cfg.QPS, cfg.Burst = 50, 300
	cfg.UserAgent = "draforge/" + Version
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{cfg: cfg, Clients: inventory.Clients{Kube: kube, Dynamic: dyn}}, nil
}

// resolveNamespace is -n, else the kubeconfig context's namespace, else "default".
func (k *kubeFlags) resolveNamespace() (string, error) {
	if k.namespace != "" {
		return k.namespace, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.kubeconfig != "" {
		rules.ExplicitPath = k.kubeconfig
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: k.context}).Namespace()
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	return ns, nil
}
