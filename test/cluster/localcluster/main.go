// Command localcluster starts and stops the local control plane used by the demo and the tests.
//
//	localcluster build [--with kube-scheduler,...]   build and cache the binaries (kueue: the kueue profile's)
//	localcluster up    [--dir DIR] [--with ...]      start, print the kubeconfig path
//	                   [--node-monitor-grace-period D ...] tune the node lifecycle controller
//	                   [--profile dra-all] [--feature-gates A=true,...] [--runtime-config G/V=true,...]
//	localcluster profiles                            list the profiles with their gates and APIs
//	localcluster spawn [--dir DIR] --name N -- CMD... run CMD detached; down stops it first
//	localcluster down  [--dir DIR]                   stop and remove DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/draforge/draforge/test/cluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: localcluster build|up|down|spawn|profiles [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dir := fs.String("dir", ".draforge/cluster", "state directory (certificates, data, logs, kubeconfig)")
	with := fs.String("with", "", "extra components: kube-controller-manager,kube-scheduler (build: also kueue)")
	cache := fs.String("cache", cluster.DefaultCacheDir(), "binary cache directory")
	name := fs.String("name", "", "spawn: name of the process")
	var nl cluster.NodeLifecycle
	fs.DurationVar(&nl.GracePeriod, "node-monitor-grace-period", 0, "up: kube-controller-manager's node grace period (0: upstream default 50s)")
	fs.DurationVar(&nl.MonitorPeriod, "node-monitor-period", 0, "up: how often it checks nodes (0: upstream default 5s)")
	fs.DurationVar(&nl.StartupGracePeriod, "node-startup-grace-period", 0, "up: grace for a new node's first heartbeat (0: upstream default 60s)")
	profile := fs.String("profile", "", "up: feature gates and API versions to turn on: "+profileNames()+" (default: Kubernetes' defaults)")
	gates := fs.String("feature-gates", "", "up: more feature gates for kube-apiserver, kube-scheduler and kube-controller-manager (A=true,B=false)")
	runtimeConfig := fs.String("runtime-config", "", "up: more API versions for kube-apiserver (group/version=true,...)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var extra []cluster.Component
	for _, c := range strings.Split(*with, ",") {
		if c = strings.TrimSpace(c); c != "" {
			extra = append(extra, cluster.Component(c))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch args[0] {
	case "build":
		for _, c := range append([]cluster.Component{cluster.Etcd, cluster.APIServer}, extra...) {
			if c == "kueue" { // the kueue profile's Kueue (cluster.KueueVersion)
				bin, _, err := cluster.KueueBinary(ctx, *cache, os.Stderr)
				if err != nil {
					return err
				}
				fmt.Println(bin)
				continue
			}
			bin, err := cluster.Binary(ctx, *cache, c, os.Stderr)
			if err != nil {
				return err
			}
			fmt.Println(bin)
		}
		return nil
	case "up":
		explicit := map[cluster.Component][]string{}
		if *gates != "" {
			for _, c := range []cluster.Component{cluster.APIServer, cluster.Scheduler, cluster.ControllerManager} {
				explicit[c] = append(explicit[c], "--feature-gates="+*gates)
			}
		}
		if *runtimeConfig != "" {
			explicit[cluster.APIServer] = append(explicit[cluster.APIServer], "--runtime-config="+*runtimeConfig)
		}
		c, err := cluster.Start(ctx, cluster.Options{Dir: *dir, CacheDir: *cache, Extra: extra, Detach: true, Log: os.Stderr,
			NodeLifecycle: nl, Profile: *profile, Args: explicit})
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "cluster ready at %s\n", c.Server)
		fmt.Println(c.Kubeconfig)
		return nil
	case "profiles":
		for _, p := range cluster.Profiles {
			fmt.Printf("%s: %s\n", p.Name, p.Doc)
			for _, g := range p.Gates {
				fmt.Printf("  gate %s (KEP-%s, %s)\n", g.Name, g.KEP, g.Stage)
			}
			for _, a := range p.APIs {
				fmt.Printf("  api  %s (KEP %s)\n", a.GroupVersion, a.KEPs)
			}
		}
		return nil
	case "spawn":
		c, err := cluster.Load(*dir)
		if err != nil {
			return err
		}
		if *name == "" {
			return fmt.Errorf("spawn needs --name")
		}
		p, err := c.Spawn(*name, fs.Args())
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s running (pid %d, log %s)\n", *name, p.Pid, p.Log)
		return nil
	case "down":
		c, err := cluster.Load(*dir)
		if os.IsNotExist(err) || (err != nil && !fileExists(*dir)) {
			fmt.Fprintln(os.Stderr, "no cluster running from", *dir)
			return nil
		}
		if err != nil {
			return err
		}
		return c.Stop()
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func profileNames() string {
	var names []string
	for _, p := range cluster.Profiles {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}
