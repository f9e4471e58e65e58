// Package cli holds the draforge cobra commands; each command file wires flags to a package
// that does the work.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/draforge/draforge/cmd/draforge/internal/buildinfo"
	"github.com/draforge/draforge/cmd/draforge/internal/output"
)

// Version is the binary's version (buildinfo), used in user agents and /api/version.
var Version = buildinfo.VersionString()

// PluginName is the file name kubectl looks for on PATH to run `kubectl draforge`.
const PluginName = "kubectl-draforge"

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
	root := newRoot(displayName(os.Args[0]))
	if err := root.ExecuteContext(ctx); err != nil {
		if !errors.Is(err, errSilent) {
			fmt.Fprintf(os.Stderr, "%s: %v\n", root.DisplayName(), err)
		}
		return 1
	}
	return 0
}

// errSilent is returned after a command already reported its failure.
var errSilent = errors.New("failed")

// displayName is how usage and errors name the command: "kubectl draforge" when the binary
// runs as a kubectl plugin (kubectl executes kubectl-draforge with that path as argv[0]),
// "draforge" otherwise.
func displayName(argv0 string) string {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") == PluginName {
		return "kubectl draforge"
	}
	return "draforge"
}

func newRoot(name string) *cobra.Command {
	kf := &kubeFlags{}
	root := &cobra.Command{
		Use:           "draforge",
		Short:         "Kubernetes DRA simulator and diagnostics",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Cobra uses the display name in usage lines, help and completions.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: name},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&kf.kubeconfig, "kubeconfig", "", "path to the kubeconfig (default $KUBECONFIG or ~/.kube/config, in-cluster when running in a pod)")
	pf.StringVar(&kf.context, "context", "", "kubeconfig context to use")
	pf.StringVarP(&kf.namespace, "namespace", "n", "", "namespace (default from the kubeconfig context)")
	pf.DurationVar(&kf.requestTimeout, "request-timeout", 30*time.Second, "timeout of each API request of diagnostic commands (0: none)")
	root.AddCommand(newVersion(), newController(kf))
	root.AddCommand(newDiscover(kf), newClaims(kf), newExplain(kf), newDoctor(kf), newGraph(kf),
		newScenario(kf), newSnapshot(kf), newReplay(kf), newTrace(), newNodes(kf), newInjectFault(kf), newFaultCampaign(kf), newClearFaults(kf), newMachines(), newServe(kf), newKubeletPlugin(kf), newTUI(kf))
	return root
}

func newVersion() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date, and Go and Kubernetes client versions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := output.Parse(out, output.Table, output.JSON, output.YAML)
			if err != nil {
				return err
			}
			i := buildinfo.Get()
			return output.Print(cmd.OutOrStdout(), f, i, func(t *output.TableWriter) {
				t.Row("version", i.Version)
				t.Row("commit", i.Commit)
				t.Row("build date", i.BuildDate)
				t.Row("go", i.GoVersion+" "+i.Platform)
				t.Row("kubernetes client", "k8s.io/client-go "+i.KubernetesClientVersion+" (Kubernetes "+i.KubernetesVersion+")")
			})
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "table", "table, json or yaml")
	return cmd
}
