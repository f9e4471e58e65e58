// Command testimage is the only binary of the images TestRealKubelet imports into containerd
// (no registry is reachable there): with no argument it is the pod sandbox's pause process
// (sleeps until SIGTERM or SIGINT); `testimage env PREFIX` prints the sorted environment
// variables starting with PREFIX, one per line, and exits.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "env" {
		var vars []string
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, os.Args[2]) {
				vars = append(vars, kv)
			}
		}
		slices.Sort(vars)
		for _, kv := range vars {
			fmt.Println(kv)
		}
		return
	}
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: testimage [env PREFIX]")
		os.Exit(2)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
