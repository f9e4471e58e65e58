package containerimage

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var testSource = Source{Version: "0.1.0", Revision: "0123456789abcdef0123456789abcdef01234567", Created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}

func TestCABundle(t *testing.T) {
	b := CABundle()
	if !bytes.Equal(b, CABundle()) {
		t.Fatal("CABundle differs between calls")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatal("the bundle has no certificate Go can load")
	}
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			t.Fatalf("certificate %d: %v", n, err)
		}
		n++
	}
	// Mozilla's store has well over 100 unconstrained roots.
	if n < 100 {
		t.Errorf("%d certificates, want the Mozilla root store", n)
	}
}

// imageFor builds one platform's image from a fake binary.
func imageFor(t *testing.T, p v1.Platform, src Source, binary string) v1.Image {
	t.Helper()
	base, err := baseEntries()
	if err != nil {
		t.Fatal(err)
	}
	bl, err := newLayer(base, src.Created)
	if err != nil {
		t.Fatal(err)
	}
	img, err := platformImage(p, src, bl, []byte(binary))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestPlatformImageConfig(t *testing.T) {
	amd := v1.Platform{OS: "linux", Architecture: "amd64"}
	img := imageFor(t, amd, testSource, "ELF amd64")
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(testSource.Created) {
		t.Errorf("config platform/created: %s/%s %v", cf.OS, cf.Architecture, cf.Created)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/draforge"}) || len(c.Cmd) != 0 {
		t.Errorf("user %q entrypoint %q cmd %q", c.User, c.Entrypoint, c.Cmd)
	}
	want := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/draforge/draforge",
		"org.opencontainers.image.version":  "0.1.0",
		"org.opencontainers.image.revision": testSource.Revision,
		"org.opencontainers.image.created":  "2026-12-01T10:00:00Z",
	}
	for k, v := range want {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 2 {
		t.Fatalf("manifest %s, config %s, %d layers", m.MediaType, m.Config.MediaType, len(m.Layers))
	}
	for _, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer media type %s", l.MediaType)
		}
	}
	if m.Annotations["org.opencontainers.image.revision"] != testSource.Revision {
		t.Errorf("manifest annotations %v", m.Annotations)
	}
	if len(cf.History) != 2 || len(cf.RootFS.DiffIDs) != 2 {
		t.Errorf("history %d, diff ids %d", len(cf.History), len(cf.RootFS.DiffIDs))
	}

	files := extract(t, img)
	for name, mode := range map[string]fs.FileMode{
		"etc/passwd": 0o644, "etc/group": 0o644, "etc/nsswitch.conf": 0o644,
		"etc/ssl/certs/ca-certificates.crt": 0o644, "usr/local/bin/draforge": 0o755,
		"tmp/": fs.ModeDir | fs.ModeSticky | 0o777, "usr/local/bin/": fs.ModeDir | 0o755,
	} {
		h, ok := files[name]
		if !ok {
			t.Errorf("%s missing from the image", name)
			continue
		}
		if got := h.FileInfo().Mode() & (fs.ModeDir | fs.ModeSticky | fs.ModePerm); got != mode {
			t.Errorf("%s mode %v, want %v", name, got, mode)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(testSource.Created) {
			t.Errorf("%s owner %d:%d %q, mtime %v", name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
	}
	if !strings.Contains(string(files["etc/passwd"].contents), "nonroot:x:65532:65532:") ||
		!strings.Contains(string(files["etc/group"].contents), "nonroot:x:65532:") {
		t.Errorf("accounts do not name 65532:\n%s%s", files["etc/passwd"].contents, files["etc/group"].contents)
	}
	if string(files["usr/local/bin/draforge"].contents) != "ELF amd64" {
		t.Errorf("binary contents %q", files["usr/local/bin/draforge"].contents)
	}
}

type file struct {
	*tar.Header
	contents []byte
}

// extract reads every layer's tar in order; parents must precede children.
func extract(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]file{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if parent := filepath.Dir(strings.TrimSuffix(h.Name, "/")); parent != "." {
				if _, ok := files[parent+"/"]; !ok {
					t.Errorf("%s comes before its directory %s/", h.Name, parent)
				}
			}
			b, _ := io.ReadAll(tr)
			files[h.Name] = file{h, b}
		}
		rc.Close()
	}
	return files
}

// Same inputs give the same bytes; the commit time, the revision and the binary each change
// the digest; the base layer is shared by every platform.
func TestImageDigestDependsOnlyOnInputs(t *testing.T) {
	amd := v1.Platform{OS: "linux", Architecture: "amd64"}
	arm := v1.Platform{OS: "linux", Architecture: "arm64"}
	a := digest(t, imageFor(t, amd, testSource, "bin"))
	if b := digest(t, imageFor(t, amd, testSource, "bin")); a != b {
		t.Fatalf("same inputs, digests %s and %s", a, b)
	}
	later := testSource
	later.Created = later.Created.Add(time.Second)
	other := testSource
	other.Revision = "fedcba"
	for name, img := range map[string]v1.Image{
		"created": imageFor(t, amd, later, "bin"), "revision": imageFor(t, amd, other, "bin"),
		"binary": imageFor(t, amd, testSource, "bin2"), "platform": imageFor(t, arm, testSource, "bin"),
	} {
		if digest(t, img) == a {
			t.Errorf("changing the %s kept digest %s", name, a)
		}
	}
	la, _ := imageFor(t, amd, testSource, "x").Layers()
	lb, _ := imageFor(t, arm, testSource, "y").Layers()
	if digest(t, la[0]) != digest(t, lb[0]) || digest(t, la[1]) == digest(t, lb[1]) {
		t.Error("the base layer must be shared and the binary layers differ")
	}
}

func TestIndexAndLayout(t *testing.T) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range Platforms {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: imageFor(t, p, testSource, "bin-"+p.Architecture),
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture}}})
	}
	dir := filepath.Join(t.TempDir(), "layout")
	// Written twice: the second write replaces the first instead of appending to index.json.
	for range 2 {
		if err := WriteLayout(dir, idx, "0.1.0"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadLayout(dir, "0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, got) != digest(t, idx) {
		t.Errorf("layout round trip changed the digest")
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations[AnnotationRefName] != "0.1.0" || index.Manifests[0].Digest != digest(t, idx) {
		t.Errorf("index.json:\n%s", b)
	}
	if _, err := ReadLayout(dir, "9.9.9"); err == nil || !strings.Contains(err.Error(), `no image named "9.9.9"`) {
		t.Errorf("ReadLayout of a missing tag: %v", err)
	}
	arm, err := PlatformImage(got, v1.Platform{OS: "linux", Architecture: "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	if cf, _ := arm.ConfigFile(); cf.Architecture != "arm64" {
		t.Errorf("PlatformImage arm64 gave %s", cf.Architecture)
	}
	if _, err := PlatformImage(got, v1.Platform{OS: "linux", Architecture: "s390x"}); err == nil {
		t.Error("PlatformImage found s390x")
	}
	tarPath := filepath.Join(t.TempDir(), "img.tar")
	ref, _ := Reference("ghcr.io/draforge/draforge", "0.1.0")
	if ref.String() != "ghcr.io/draforge/draforge:0.1.0" {
		t.Errorf("Reference without tag = %s", ref)
	}
	if err := WriteDockerTarball(tarPath, got, Platforms[0], mustTag(t, ref.String())); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tarPath); err != nil || fi.Size() == 0 {
		t.Errorf("docker archive: %v", err)
	}
}

// The Dockerfile's build stage writes these files with writeEntries: same names, modes,
// times and bytes as the builder's base layer.
func TestWriteEntriesMatchesLayer(t *testing.T) {
	base, err := baseEntries()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeEntries(dir, base, testSource.Created); err != nil {
		t.Fatal(err)
	}
	for _, e := range base {
		fi, err := os.Lstat(filepath.Join(dir, e.name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&(fs.ModeDir|fs.ModeSticky|fs.ModePerm) != e.mode || !fi.ModTime().Equal(testSource.Created) {
			t.Errorf("%s: mode %v mtime %v, want %v %v", e.name, fi.Mode(), fi.ModTime(), e.mode, testSource.Created)
		}
		if !e.mode.IsDir() {
			if b, _ := os.ReadFile(filepath.Join(dir, e.name)); !bytes.Equal(b, e.data) {
				t.Errorf("%s contents differ", e.name)
			}
		}
	}
}

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}
