// Command draforge is the DRAForge controller, API server and CLI.
package main

import (
	"os"

	"github.com/draforge/draforge/cmd/draforge/internal/cli"
)

func main() { os.Exit(cli.Execute()) }
