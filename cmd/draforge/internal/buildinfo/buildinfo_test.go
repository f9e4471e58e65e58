package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.4",
		Main:      debug.Module{Path: "github.com/draforge/draforge", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "k8s.io/api", Version: "v0.37.2"},
			{Path: "k8s.io/client-go", Version: "v0.37.2"},
		},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	for _, tc := range []struct {
		name                  string
		bi                    *debug.BuildInfo
		version, commit, date string
		want                  Info
	}{
		{"stamped wins over vcs", bi, "0.1.0", "def456", "2026-11-30T00:00:00Z", Info{
			Version: "0.1.0", Commit: "def456", BuildDate: "2026-11-30T00:00:00Z", GoVersion: "go1.26.4",
			KubernetesClientVersion: "v0.37.2", KubernetesVersion: "v1.37.2"}},
		{"vcs fallback marks a dirty tree", bi, "", "", "", Info{
			Version: "dev", Commit: "abc123-dirty", BuildDate: "2026-12-01T10:00:00Z", GoVersion: "go1.26.4",
			KubernetesClientVersion: "v0.37.2", KubernetesVersion: "v1.37.2"}},
		{"go install of a tagged module", &debug.BuildInfo{GoVersion: "go1.26.4",
			Main: debug.Module{Version: "v0.2.0"},
			Deps: []*debug.Module{{Path: "k8s.io/client-go", Version: "v0.36.0", Replace: &debug.Module{Version: "v0.36.1"}}}}, "", "", "", Info{
			Version: "v0.2.0", Commit: "unknown", BuildDate: "unknown", GoVersion: "go1.26.4",
			KubernetesClientVersion: "v0.36.1", KubernetesVersion: "v1.36.1"}},
		{"no build info", nil, "", "", "", Info{
			Version: "dev", Commit: "unknown", BuildDate: "unknown", KubernetesClientVersion: "unknown", KubernetesVersion: "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuildInfo(tc.bi, tc.version, tc.commit, tc.date)
			if tc.bi == nil {
				tc.want.GoVersion = got.GoVersion // runtime.Version()
			}
			tc.want.Platform = got.Platform
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if got.Platform == "" || got.GoVersion == "" {
				t.Errorf("platform %q, go %q", got.Platform, got.GoVersion)
			}
		})
	}
}

// Get fills every field whatever the binary recorded (this test binary does not link
// client-go, so the Kubernetes fields read "unknown").
func TestGetFillsEveryField(t *testing.T) {
	i := Get()
	for name, v := range map[string]string{"version": i.Version, "commit": i.Commit, "date": i.BuildDate,
		"go": i.GoVersion, "platform": i.Platform, "client": i.KubernetesClientVersion, "kubernetes": i.KubernetesVersion} {
		if v == "" {
			t.Errorf("%s is empty: %+v", name, i)
		}
	}
}
