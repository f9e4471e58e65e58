package containerimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// VersionFile is the one place the release version is written: the image build stamps it into
// the binary and the image labels, and the chart's appVersion must equal it (tested).
const VersionFile = "VERSION"

// Source identifies what an image is built from.
type Source struct {
	// Version is the release version (VERSION), e.g. 0.1.0; also the image tag.
	Version string
	// Revision is the git commit, with "-dirty" when tracked files differ from it.
	Revision string
	// Created is the commit time (or $SOURCE_DATE_EPOCH), the only time recorded in the
	// image, so the same commit always gives the same digest.
	Created time.Time
}

// semver is semantic versioning 2.0.0 without a leading "v", as Chart appVersion and tags use it.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$`)

// ReadVersion reads and checks dir/VERSION.
func ReadVersion(dir string) (string, error) {
	path := filepath.Join(dir, VersionFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if err := CheckVersion(v); err != nil {
		return "", fmt.Errorf("%s:1:1: %w", path, err)
	}
	return v, nil
}

// CheckVersion accepts a semantic version without a leading "v".
func CheckVersion(v string) error {
	if !semver.MatchString(v) {
		return fmt.Errorf("%q is not a semantic version such as 0.1.0 (no leading v)", v)
	}
	return nil
}

// ReadSource reads the version from dir/VERSION and the revision and commit time from git.
func ReadSource(ctx context.Context, dir string) (Source, error) {
	version, err := ReadVersion(dir)
	if err != nil {
		return Source{}, err
	}
	rev, err := ReadRevision(ctx, dir)
	if err != nil {
		return Source{}, err
	}
	created, err := ReadCreated(ctx, dir)
	if err != nil {
		return Source{}, err
	}
	return Source{Version: version, Revision: rev, Created: created}, nil
}

// ReadRevision is git HEAD in dir, with "-dirty" when tracked files differ from it (untracked
// files do not count: they are not built into the binary unless added).
func ReadRevision(ctx context.Context, dir string) (string, error) {
	rev, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	status, err := git(ctx, dir, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return "", err
	}
	if status != "" {
		rev += "-dirty"
	}
	return rev, nil
}

// ReadCreated is $SOURCE_DATE_EPOCH when set (reproducible-builds.org convention), else the
// commit time of HEAD in dir.
func ReadCreated(ctx context.Context, dir string) (time.Time, error) {
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		var err error
		if epoch, err = git(ctx, dir, "log", "-1", "--format=%ct", "HEAD"); err != nil {
			return time.Time{}, err
		}
	}
	return ParseEpoch(epoch)
}

// ParseEpoch parses seconds since the Unix epoch as a UTC time.
func ParseEpoch(s string) (time.Time, error) {
	sec, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("source date %q is not seconds since the Unix epoch", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s (outside a git checkout, pass --version, --revision and --created)",
			strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}
