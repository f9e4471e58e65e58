package cli

import (
	"context"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/draforge/draforge/cmd/draforge/internal/output"
	"github.com/draforge/draforge/drivers/doctor"
	"github.com/draforge/draforge/drivers/inventory"
)

func newDoctor(kf *kubeFlags) *cobra.Command {
	var out, controllerURL string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the cluster's DRA setup and DRAForge's objects (exit 1 if any check FAILs)",
		Long: `Doctor runs checks with stable IDs (DRA001…) and reports PASS, WARN, FAIL or SKIP with
evidence and a remediation. It looks at all namespaces unless -n is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := output.Parse(out, output.Table, output.JSON, output.YAML)
			if err != nil {
				return err
			}
			c, err := kf.clients()
			if err != nil {
				return err
			}
			ns := ""
			if cmd.Flag("namespace").Changed {
				ns = kf.namespace
			}
			ctx := cmd.Context()
			probeCtx, cancel := ctx, context.CancelFunc(func() {})
			if kf.requestTimeout > 0 {
				probeCtx, cancel = context.WithTimeout(ctx, 2*kf.requestTimeout)
			}
			defer cancel()
			facts := doctor.Gather(probeCtx, doctor.GatherOptions{
				Discovery: c.Kube.Discovery(), Dynamic: c.Dynamic, ControllerURL: controllerURL,
				HTTP: &http.Client{Timeout: kf.requestTimeout},
			})
			s, err := inventory.List(ctx, c.Clients, ns)
			if err != nil {
				facts.SnapshotError = err.Error()
				s = nil
			}
			rep := doctor.Run(s, facts)
			if err := output.Print(cmd.OutOrStdout(), f, rep, func(t *output.TableWriter) {
				t.Row("ID", "STATUS", "CHECK", "MESSAGE")
				for _, r := range rep.Results {
					t.Row(r.ID, r.Status, r.Name, r.Message)
				}
				t.Flush()
				w := cmd.OutOrStdout()
				for _, r := range rep.Results {
					if r.Status == doctor.Pass || r.Status == doctor.Skip {
						continue
					}
					_, _ = w.Write([]byte("\n" + r.ID + " " + string(r.Status) + ": " + r.Message + "\n"))
					for _, e := range r.Evidence {
						_, _ = w.Write([]byte("  evidence: " + e + "\n"))
					}
					if r.Remediation != "" {
						_, _ = w.Write([]byte("  remediation: " + strings.TrimSpace(r.Remediation) + "\n"))
					}
				}
			}); err != nil {
				return err
			}
			if rep.Failed() {
				return errSilent
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "table", "table, json or yaml")
	cmd.Flags().StringVar(&controllerURL, "controller-url", "", "base URL of the controller's --runtime-address or --debug-address, e.g. http://127.0.0.1:8082 (its /readyz is checked; skipped when empty)")
	return cmd
}
