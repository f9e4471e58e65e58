// Package buildinfo says which draforge this is: the version, commit and build date stamped
// at build time (the image build and `go tool task build` set them from the VERSION file and
// git), falling back to what the Go toolchain recorded in the binary, plus the Go and
// Kubernetes client library versions it was built with.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Stamped with -ldflags "-X github.com/draforge/draforge/cmd/draforge/internal/buildinfo.Version=...";
// empty means not stamped.
var (
	Version string
	Commit  string
	Date    string
)

// clientGo is the Kubernetes client library whose version the binary reports.
const clientGo = "k8s.io/client-go"

// Info is what `draforge version` prints.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// BuildDate is the commit time for release builds (RFC 3339, UTC), not the wall clock.
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// KubernetesClientVersion is the k8s.io/client-go module version (v0.X.Y);
	// KubernetesVersion the Kubernetes release it belongs to (v1.X.Y).
	KubernetesClientVersion string `json:"kubernetesClientVersion"`
	KubernetesVersion       string `json:"kubernetesVersion"`
}

// Get returns the running binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, Version, Commit, Date)
}

// VersionString is the version alone (user agents, /api/version).
func VersionString() string { return Get().Version }

// fromBuildInfo merges the stamped values with bi (nil when the binary has none).
func fromBuildInfo(bi *debug.BuildInfo, version, commit, date string) Info {
	info := Info{Version: version, Commit: commit, BuildDate: date, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version // go install ...@vX.Y.Z
		}
		if info.Commit == "" && settings["vcs.revision"] != "" {
			info.Commit = settings["vcs.revision"]
			if settings["vcs.modified"] == "true" {
				info.Commit += "-dirty"
			}
		}
		if info.BuildDate == "" {
			info.BuildDate = settings["vcs.time"]
		}
		for _, d := range bi.Deps {
			if d.Path == clientGo {
				if d.Replace != nil {
					d = d.Replace
				}
				info.KubernetesClientVersion = d.Version
				info.KubernetesVersion = kubernetesRelease(d.Version)
			}
		}
	}
	if info.Version == "" {
		info.Version = "dev"
	}
	for _, f := range []*string{&info.Commit, &info.BuildDate, &info.KubernetesClientVersion, &info.KubernetesVersion} {
		if *f == "" {
			*f = "unknown"
		}
	}
	return info
}

// kubernetesRelease maps a staging module version (v0.37.2) to its Kubernetes release
// (v1.37.2); anything else is returned unchanged.
func kubernetesRelease(v string) string {
	if rest, ok := strings.CutPrefix(v, "v0."); ok {
		return "v1." + rest
	}
	return v
}
