package containerimage

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// repoRoot is two levels up from this package.
var repoRoot = filepath.Join("..", "..")

// The release version has one source, VERSION: the chart's appVersion, its default image and
// the CHANGELOG must agree with it and with what this package publishes.
func TestVersionAgreement(t *testing.T) {
	version, err := ReadVersion(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
		Home       string `json:"home"`
		Sources    []string
	}
	readYAML(t, filepath.Join(repoRoot, "deploy/helm/draforge/Chart.yaml"), &chart)
	if chart.AppVersion != version {
		t.Errorf("Chart.yaml appVersion %q, VERSION %q: change both together", chart.AppVersion, version)
	}
	if chart.Home != SourceURL || !slices.Contains(chart.Sources, SourceURL) {
		t.Errorf("Chart.yaml home %q sources %v, the image's source label is %s", chart.Home, chart.Sources, SourceURL)
	}

	type image struct{ Repository, Tag string }
	var values struct {
		Server     struct{ Image image }
		Controller struct{ Image image }
	}
	readYAML(t, filepath.Join(repoRoot, "deploy/helm/draforge/values.yaml"), &values)
	for name, img := range map[string]image{"server": values.Server.Image, "controller": values.Controller.Image} {
		// An empty tag means appVersion, the tag `go tool task image` publishes.
		if img.Repository != DefaultRepository || img.Tag != "" {
			t.Errorf("values %s.image = %+v, want repository %s and an empty tag", name, img, DefaultRepository)
		}
	}

	changelog, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	first := regexp.MustCompile(`(?m)^## \[([^\]]+)\]`).FindSubmatch(changelog)
	if first == nil || (string(first[1]) != version && string(first[1]) != "Unreleased") {
		t.Errorf("CHANGELOG.md: the first release heading must be ## [%s] (or ## [Unreleased] above it), got %q", version, first)
	}
	if !strings.Contains(string(changelog), "## ["+version+"]") {
		t.Errorf("CHANGELOG.md has no ## [%s] section", version)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// The Dockerfile must produce what the builder produces: its final stage is empty plus the
// builder's --rootfs output, with the same user, entrypoint, environment and labels.
func TestDockerfileMatchesBuilder(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Join continuation lines, drop comments.
	var lines []string
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		if s, ok := strings.CutSuffix(l, `\`); ok {
			cur += s + " "
			continue
		}
		lines = append(lines, cur+l)
		cur = ""
	}
	stages := map[string][]string{}
	stage := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			stage = l
		}
		stages[stage] = append(stages[stage], l)
	}
	final := stages["FROM scratch"]
	if final == nil {
		t.Fatalf("no FROM scratch stage in:\n%s", strings.Join(lines, "\n"))
	}
	want := []string{
		"COPY --from=build /rootfs/ /",
		"ENV " + strings.Join(Env, " "),
		"USER " + User,
		"ENTRYPOINT " + mustJSON(t, Entrypoint),
	}
	for _, w := range want {
		if !slices.Contains(final, w) {
			t.Errorf("final stage lacks %q:\n%s", w, strings.Join(final, "\n"))
		}
	}
	for _, l := range final {
		if k, _, _ := strings.Cut(l, " "); !slices.Contains([]string{"FROM", "ARG", "COPY", "ENV", "USER", "ENTRYPOINT", "LABEL"}, k) {
			t.Errorf("final stage adds %q, which the builder does not", l)
		}
	}
	label := strings.Join(final, "\n")
	src := Source{Version: "${VERSION}", Revision: "${REVISION}"}
	labels := Labels(src)
	labels[LabelCreated] = "${CREATED}"
	for k, v := range labels {
		if !strings.Contains(label, k+"="+mustJSON(t, v)) {
			t.Errorf("Dockerfile has no LABEL %s=%q", k, v)
		}
	}
	build := strings.Join(lines, "\n")
	if !strings.Contains(build, "go run ./build/containerimage/imagebuild --rootfs /rootfs") {
		t.Error("the build stage does not run the builder's --rootfs mode")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
