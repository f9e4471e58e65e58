// Package cli holds the draforge cobra commands; each command file wires flags to a package
// that does the work.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Version is stamped at build time with -ldflags "-X .../cli.Version=...".
var Version = "dev"

// kubeFlags are the kubectl-like connection flags shared by every command.
type kubeFlags struct {
	kubeconfig     string
	context        string
	namespace      string
	requestTimeout time.Duration
}

func (k *kubeFlags) config() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.kubeconfig != "" {
		rules.ExplicitPath = k.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: k.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// Execute runs the root command and returns the process exit code.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		if !errors.Is(err, errSilent) {
			fmt.Fprintln(os.Stderr, "draforge:", err)
		}
		return 1
	}
	return 0
}

// errSilent is returned after a command already reported its failure.
var errSilent = errors.New("failed")

func newRoot() *cobra.Command {
	kf := &kubeFlags{}
	root := &cobra.Command{
		Use:           "draforge",
		Short:         "Kubernetes DRA simulator and diagnostics",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&kf.kubeconfig, "kubeconfig", "", "path to the kubeconfig (default $KUBECONFIG or ~/.kube/config, in-cluster when running in a pod)")
	pf.StringVar(&kf.context, "context", "", "kubeconfig context to use")
	pf.StringVarP(&kf.namespace, "namespace", "n", "", "namespace (default from the kubeconfig context)")
	pf.DurationVar(&kf.requestTimeout, "request-timeout", 30*time.Second, "timeout of each API request of diagnostic commands (0: none)")
	root.AddCommand(newVersion(), newController(kf))
	root.AddCommand(newDiscover(kf), newClaims(kf), newExplain(kf), newDoctor(kf), newGraph(kf),
		newScenario(kf), newNodes(kf), newInjectFault(kf), newClearFaults(kf), newMachines(), newServe(kf))
	return root
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the draforge version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), Version) },
	}
}
