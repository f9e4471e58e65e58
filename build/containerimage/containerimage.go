// Package containerimage builds the draforge container image without a container engine: a
// static binary per platform (CGO_ENABLED=0, -trimpath, empty build ID) on a base made from
// nothing (account files, CA roots, /tmp), running as 65532:65532, with OCI labels, as an OCI
// image index for linux/amd64 and linux/arm64. Every time in it is the commit time, so the
// same commit and Go toolchain give the same digest. It writes an OCI layout, pushes to a
// registry, or writes one platform as a docker-archive tarball (for `kind load`).
package containerimage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Published names: the chart's default image is DefaultRepository:<VERSION> (tested).
const (
	DefaultRepository = "ghcr.io/draforge/draforge"
	SourceURL         = "https://github.com/draforge/draforge"
	// User is numeric so kubelet can enforce runAsNonRoot without reading /etc/passwd.
	User = "65532:65532"
)

// OCI annotation and label keys (image-spec annotations.md).
const (
	LabelSource      = "org.opencontainers.image.source"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelCreated     = "org.opencontainers.image.created"
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
	// AnnotationRefName names the index inside an OCI layout (index.json).
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Platforms is what the image is built for.
var Platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// Entrypoint runs the binary; the chart's Deployments pass only args (controller, serve).
var Entrypoint = []string{BinaryPath}

// Env of the image: no shell, so PATH only names the binary's directory.
var Env = []string{"PATH=/usr/local/bin"}

// Labels are the image config labels, also used as manifest and index annotations.
func Labels(src Source) map[string]string {
	return map[string]string{
		LabelSource:      SourceURL,
		LabelVersion:     src.Version,
		LabelRevision:    src.Revision,
		LabelCreated:     src.Created.Format(time.RFC3339),
		LabelTitle:       "draforge",
		LabelDescription: "DRAForge, a Kubernetes Dynamic Resource Allocation simulator: controller, API server and CLI",
	}
}

// Options say what to build.
type Options struct {
	// Dir is the repository root (the directory of go.mod and VERSION).
	Dir    string
	Source Source
	// Platforms defaults to Platforms.
	Platforms []v1.Platform
	// Log receives one line per step; nil discards.
	Log io.Writer
}

// Build compiles draforge for every platform and assembles the image index in memory.
func Build(ctx context.Context, o Options) (v1.ImageIndex, error) {
	if o.Platforms == nil {
		o.Platforms = Platforms
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Source.Version == "" || o.Source.Revision == "" || o.Source.Created.IsZero() {
		return nil, fmt.Errorf("containerimage: source needs a version, a revision and a creation time: %+v", o.Source)
	}
	base, err := baseEntries()
	if err != nil {
		return nil, err
	}
	baseLayer, err := newLayer(base, o.Source.Created)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "draforge-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		fmt.Fprintf(o.Log, "building draforge %s for %s\n", o.Source.Version, p)
		bin := filepath.Join(tmp, "draforge-"+p.OS+"-"+p.Architecture)
		if err := buildBinary(ctx, o.Dir, p, o.Source, bin); err != nil {
			return nil, err
		}
		binary, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		img, err := platformImage(p, o.Source, baseLayer, binary)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture}}})
	}
	return mutate.Annotations(idx, Labels(o.Source)).(v1.ImageIndex), nil
}

// platformImage is the base layer plus the binary's layer with the config the chart expects.
func platformImage(p v1.Platform, src Source, base v1.Layer, binary []byte) (v1.Image, error) {
	app, err := newLayer(binaryEntries(binary), src.Created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: src.Created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Created:      created,
		Config: v1.Config{
			User:       User,
			Entrypoint: Entrypoint,
			Env:        Env,
			Labels:     Labels(src),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer,
			History: v1.History{Created: created, CreatedBy: "draforge image: /etc (accounts, CA roots), /tmp", Comment: "containerimage"}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer,
			History: v1.History{Created: created, CreatedBy: "draforge image: " + BinaryPath + " (" + p.String() + ")", Comment: "containerimage"}},
	)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, Labels(src)).(v1.Image), nil
}

// newLayer is a gzip-compressed OCI layer of es.
func newLayer(es []entry, mtime time.Time) (v1.Layer, error) {
	raw, err := layerTar(es, mtime)
	if err != nil {
		return nil, err
	}
	gz, err := gzipBytes(raw)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(gz)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// WriteRootfs writes the image's file system for platform p under dir, building the binary
// there: the Dockerfile's build stage copies it into a scratch image, so both ways of building
// ship the same files.
func WriteRootfs(ctx context.Context, dir string, p v1.Platform, src Source, repo string) error {
	base, err := baseEntries()
	if err != nil {
		return err
	}
	dirs := slices.DeleteFunc(binaryEntries(nil), func(e entry) bool { return !e.mode.IsDir() }) // the binary is built in place below
	if err := writeEntries(dir, append(base, dirs...), src.Created); err != nil {
		return err
	}
	bin := filepath.Join(dir, filepath.FromSlash(BinaryPath[1:]))
	if err := buildBinary(ctx, repo, p, src, bin); err != nil {
		return err
	}
	// The binary was written after its directory's mtime was set.
	for _, p := range []string{bin, filepath.Dir(bin)} {
		if err := os.Chtimes(p, src.Created, src.Created); err != nil {
			return err
		}
	}
	return os.Chmod(bin, 0o755)
}
