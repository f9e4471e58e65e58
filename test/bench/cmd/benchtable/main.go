// Command benchtable renders a bench run's record (`benchreport -json FILE`) as the Markdown
// table of docs/benchmarks.md: with -doc it rewrites the table between the document's
// benchtable markers, else it prints the table. With -runs DIR it keeps the run in DIR (the
// runs kept in the repository, docs/bench-runs) and lists every run kept there with its misses
// below the table. `go tool task bench:table` runs it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/draforge/draforge/test/bench/benchrun"
)

func main() {
	doc := flag.String("doc", "", "Markdown file whose table between "+benchrun.Begin+" and "+benchrun.End+" is rewritten (default: print the table)")
	runs := flag.String("runs", "", "directory of kept runs: the run is kept there (as "+benchrun.FileName(&benchrun.Run{Commit: "<commit>"})+") and every run there is listed below the table")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: benchtable [-doc FILE.md] [-runs DIR] RUN.json")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *doc, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(runFile, docFile, runsDir string) error {
	data, err := os.ReadFile(runFile)
	if err != nil {
		return err
	}
	r, err := benchrun.Read(runFile, data)
	if err != nil {
		return err
	}
	table := benchrun.Markdown(r)
	if runsDir != "" {
		if err := benchrun.Keep(runsDir, r, data); err != nil {
			return err
		}
		kept, err := benchrun.ReadDir(runsDir)
		if err != nil {
			return err
		}
		table += "\n" + benchrun.History(kept, r)
	}
	if docFile == "" {
		_, err := os.Stdout.WriteString(table)
		return err
	}
	doc, err := os.ReadFile(docFile)
	if err != nil {
		return err
	}
	out, err := benchrun.Replace(string(doc), table)
	if err != nil {
		return fmt.Errorf("%s: %w", docFile, err)
	}
	return os.WriteFile(docFile, []byte(out), 0o644)
}
