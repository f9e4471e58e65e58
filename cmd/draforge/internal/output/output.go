// Package output prints command results as a table (text/tabwriter), JSON or YAML
// (sigs.k8s.io/yaml, so YAML follows the json tags).
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Format is an output format name.
type Format string

// Formats shared by commands.
const (
	Table   Format = "table"
	JSON    Format = "json"
	YAML    Format = "yaml"
	DOT     Format = "dot"
	Mermaid Format = "mermaid"
)

// Parse checks that s is one of allowed.
func Parse(s string, allowed ...Format) (Format, error) {
	f := Format(strings.ToLower(s))
	if slices.Contains(allowed, f) {
		return f, nil
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return "", fmt.Errorf("unknown output format %q (want %s)", s, strings.Join(names, ", "))
}

// Print writes v as JSON or YAML, or calls table for the table format.
func Print(w io.Writer, f Format, v any, table func(*TableWriter)) error {
	switch f {
	case JSON:
		return WriteJSON(w, v)
	case YAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case Table, "":
		t := NewTable(w)
		table(t)
		return t.Flush()
	}
	return fmt.Errorf("output format %q is not supported here", f)
}

// WriteJSON writes v as indented JSON with a trailing newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// TableWriter aligns tab-separated columns.
type TableWriter struct{ tw *tabwriter.Writer }

// NewTable returns a table writer on w.
func NewTable(w io.Writer) *TableWriter {
	return &TableWriter{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
}

// Row writes one row; empty cells are shown as "-".
func (t *TableWriter) Row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
		if s[i] == "" {
			s[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

// Flush writes the aligned table.
func (t *TableWriter) Flush() error { return t.tw.Flush() }
