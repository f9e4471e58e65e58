// Package sdpparity proves that the three definitions of the SimulatedDevicePool schema agree:
// the CRD (deploy/crds, checked by the real kube-apiserver in test/e2e), the CUE schema
// (schemas/simulateddevicepool.cue, as `cue vet -d '#Document'` checks it) and the Go validator
// (drivers/simdevice strict decoding plus Validate). It loads one corpus of SimulatedDevicePool
// documents and gives each side's verdict; the tests require the same verdict for every
// document, and the expected one where the corpus states it.
//
// The corpus is every SimulatedDevicePool document of examples/scenarios (valid),
// test/scenarios/invalid/sdp-*.yaml (invalid) and test/scenarios/sdp/*.yaml, where each
// document starts with a line "# case <name>: valid|invalid — why".
package sdpparity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	cueyaml "cuelang.org/go/encoding/yaml"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsjson "sigs.k8s.io/json"

	"github.com/draforge/draforge/drivers/simdevice"
	"github.com/draforge/draforge/schemas"
)

// Verdicts.
const (
	Valid   = "valid"
	Invalid = "invalid"
)

// Doc is one SimulatedDevicePool document of the corpus.
type Doc struct {
	// Name identifies the document in reports: the case name, or file#index.
	Name string
	// File and Line locate the document (repository-relative file).
	File string
	Line int
	// Want is Valid, Invalid or "" (no stated expectation).
	Want string
	// WantCUE, when set, is a documented exception: the CUE schema's expected verdict where
	// it deliberately differs from the API server's (explicit nulls, which the API server
	// drops, and integral floats such as 3.0, which it takes for integers; CUE rejects both).
	WantCUE string
	// Object is the document as JSON-compatible data.
	Object map[string]any
	// cue is the document as CUE data, positioned in File.
	cue cue.Value
}

// Namespace is the namespace every document is checked in (its own is replaced), as the
// API server only accepts a document in the namespace of the request.
const Namespace = "sdp-parity"

var caseRE = regexp.MustCompile(`(?m)^# case (\S+): (valid|invalid)(?: \(cue: (valid|invalid)\))?`)

// Load reads the corpus below the repository root.
func Load(root string) ([]Doc, error) {
	ctx := cuecontext.New()
	var docs []Doc
	add := func(pattern, want string, needCase bool) error {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return err
		}
		sort.Strings(files)
		for _, f := range files {
			d, err := loadFile(ctx, root, f, want, needCase)
			if err != nil {
				return err
			}
			docs = append(docs, d...)
		}
		return nil
	}
	if err := add("examples/scenarios/*.yaml", Valid, false); err != nil {
		return nil, err
	}
	if err := add("test/scenarios/invalid/sdp-*.yaml", Invalid, false); err != nil {
		return nil, err
	}
	if err := add("test/scenarios/sdp/*.yaml", "", true); err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for _, d := range docs {
		if prev, ok := seen[d.Name]; ok {
			return nil, fmt.Errorf("%s:%d: case %s already defined at %s", d.File, d.Line, d.Name, prev)
		}
		seen[d.Name] = fmt.Sprintf("%s:%d", d.File, d.Line)
	}
	return docs, nil
}

func loadFile(ctx *cue.Context, root, file, want string, needCase bool) ([]Doc, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(root, file)
	return parse(ctx, rel, src, want, needCase)
}

// Parse returns the SimulatedDevicePool documents of src (a YAML stream read as file rel), with
// no expected verdict: the fuzz target's way in.
func Parse(rel string, src []byte) ([]Doc, error) {
	return parse(cuecontext.New(), rel, schemas.LineFeeds(src), "", false)
}

func parse(ctx *cue.Context, rel string, src []byte, want string, needCase bool) ([]Doc, error) {
	var docs []Doc
	dec := cueyaml.NewDecoder(rel, bytes.NewReader(src))
	for i := 0; ; i++ {
		expr, err := dec.Extract()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		v := ctx.BuildExpr(expr)
		if v.Null() == nil {
			continue
		}
		raw, err := v.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", rel, i, err)
		}
		// Numbers as the API server decodes them: int64 when integral and in range.
		var obj map[string]any
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("%s: document %d is not an object", rel, i)
		}
		if obj["kind"] != simdevice.Kind {
			continue
		}
		d := Doc{Name: fmt.Sprintf("%s#%d", rel, i), File: rel, Line: v.Pos().Line(), Want: want, Object: obj, cue: v}
		if needCase {
			// The case line is the last one before the document's first line.
			head := string(src[:lineOffset(src, d.Line)])
			if k := strings.LastIndex(head, "\n---"); k >= 0 {
				head = head[k:]
			}
			m := caseRE.FindAllStringSubmatch(head, -1)
			if len(m) == 0 {
				return nil, fmt.Errorf("%s:%d: document without a '# case <name>: valid|invalid' line", rel, d.Line)
			}
			d.Name, d.Want, d.WantCUE = m[len(m)-1][1], m[len(m)-1][2], m[len(m)-1][3]
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// lineOffset is the byte offset of the start of 1-based line n.
func lineOffset(src []byte, n int) int {
	off := 0
	for l := 1; l < n; l++ {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			return len(src)
		}
		off += i + 1
	}
	return off
}

// InNamespace returns a copy of the document's object in namespace ns.
func (d Doc) InNamespace(ns string) map[string]any {
	raw, _ := json.Marshal(d.Object)
	var obj map[string]any
	_ = sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &obj)
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	md["namespace"] = ns
	return obj
}

// Go is the Go validator's verdict: the messages of simdevice's strict decoding and Validate
// (none when valid).
func (d Doc) Go() []string {
	p, errs := simdevice.FromUnstructuredStrict(&unstructured.Unstructured{Object: d.InNamespace(Namespace)})
	if p != nil {
		errs = append(errs, p.Validate()...)
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// CUE is `cue vet -c -d '#Document' ./schemas`'s verdict on the document: its error messages
// with file:line:col (none when valid).
func (d Doc) CUE(schema cue.Value) []string {
	// The document keeps its own namespace here (an optional DNS label to CUE), so errors
	// stay positioned in its file; the corpus only uses valid namespaces.
	err := schema.LookupPath(cue.ParsePath("#Document")).Unify(d.cue).Validate(cue.Concrete(true))
	if err == nil {
		return nil
	}
	var out []string
	for _, e := range cueerrors.Errors(err) {
		out = append(out, strings.TrimSpace(cueerrors.Details(e, nil)))
	}
	return out
}

// Schema compiles the CUE schemas the CUE verdicts use.
func Schema() (cue.Value, error) {
	return schemas.Schema(cuecontext.New())
}

// Verdict is Valid when msgs is empty, else Invalid.
func Verdict(msgs []string) string {
	if len(msgs) == 0 {
		return Valid
	}
	return Invalid
}

// Side is one definition's verdict on a document.
type Side struct {
	Name string // "api-server", "cue", "go"
	Msgs []string
}

// expected is the verdict side should give: the corpus expectation, or for the CUE sides
// its documented exception.
func (d Doc) expected(side string) string {
	if strings.HasPrefix(side, "cue") && d.WantCUE != "" {
		return d.WantCUE
	}
	return d.Want
}

// Mismatch describes a document the sides disagree on (or a side differs from the corpus
// expectation for it), or "". Sides whose name starts with "cue" are held to WantCUE when set.
func Mismatch(d Doc, sides ...Side) string {
	ok := true
	for _, s := range sides {
		if d.Want == "" {
			ok = ok && Verdict(s.Msgs) == Verdict(sides[0].Msgs)
		} else {
			ok = ok && Verdict(s.Msgs) == d.expected(s.Name)
		}
	}
	if ok {
		return ""
	}
	var b strings.Builder
	want := or(d.Want, "the same verdict from every side")
	if d.WantCUE != "" {
		want += " (cue: " + d.WantCUE + ", a documented exception)"
	}
	fmt.Fprintf(&b, "%s (%s:%d), expected %s:\n", d.Name, d.File, d.Line, want)
	for _, s := range sides {
		fmt.Fprintf(&b, "  %-10s %s", s.Name, Verdict(s.Msgs))
		for _, m := range s.Msgs {
			fmt.Fprintf(&b, "\n      %s", strings.ReplaceAll(m, "\n", "\n      "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// CUEVet is the verdict of the real `cue vet -c -d '#Document' ./schemas` command (cueBin, the
// binary `go tool -n cue` names) on the document alone, run in the repository root: its
// messages when it exits 1, none when it exits 0.
func (d Doc) CUEVet(ctx context.Context, cueBin, root string) ([]string, error) {
	raw, err := cueyaml.Encode(d.cue) // keeps what the document wrote: 3.0 stays a float
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "sdp-*.yaml")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(raw); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, cueBin, "vet", "-c", "-d", "#Document", "./schemas", f.Name())
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return []string{strings.TrimSpace(string(out))}, nil
	}
	return nil, fmt.Errorf("cue vet %s: %w: %s", d.Name, err, out)
}

// Exception reports whether the CUE schema and the Go validator may disagree on a document
// for a reason the corpus documents ("(cue: ...)" cases): CUE refuses an explicit null and an
// integral float (3.0), which the API server and Go take; CUE cannot compare quantities or do
// arithmetic on them, so only Go (and the CRD) check a request policy's values against each
// other. cueMsgs and goMsgs are the two sides' messages.
func Exception(obj map[string]any, cueMsgs, goMsgs []string) bool {
	switch {
	case len(cueMsgs) > 0 && len(goMsgs) == 0:
		// CUE's own reading of the number counts: "8." is a float to CUE, while its JSON form
		// ("8") decodes to an int, as the API server reads it.
		return hasNullOrIntegralFloat(obj) || slices.ContainsFunc(cueMsgs, func(m string) bool {
			return strings.Contains(m, "(mismatched types float and int)")
		})
	case len(cueMsgs) == 0 && len(goMsgs) > 0:
		for _, m := range goMsgs {
			if !strings.Contains(m, ".requestPolicies[") {
				return false
			}
		}
		return true
	}
	return false
}

func hasNullOrIntegralFloat(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case float64:
		return v == math.Trunc(v)
	case map[string]any:
		for _, e := range v {
			if hasNullOrIntegralFloat(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasNullOrIntegralFloat(e) {
				return true
			}
		}
	}
	return false
}
