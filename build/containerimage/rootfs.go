package containerimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/pem"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's files besides the binary. rootfs/ holds the account files (65532 is the
// distroless "nonroot" user the chart's securityContext names); the CA bundle is generated.
//
//go:embed rootfs
var rootfsFiles embed.FS

// Paths inside the image.
const (
	BinaryPath   = "/usr/local/bin/draforge"
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// entry is one file or directory of a layer.
type entry struct {
	name string // relative, without a leading slash
	mode fs.FileMode
	data []byte // nil for a directory
}

// baseEntries are the arch-independent files: accounts, resolver order, CA roots and /tmp.
func baseEntries() ([]entry, error) {
	es := []entry{{name: "etc", mode: fs.ModeDir | 0o755}}
	for _, f := range []string{"etc/group", "etc/nsswitch.conf", "etc/passwd"} {
		b, err := rootfsFiles.ReadFile(path.Join("rootfs", f))
		if err != nil {
			return nil, err
		}
		es = append(es, entry{name: f, mode: 0o644, data: b})
	}
	return append(es,
		entry{name: "etc/ssl", mode: fs.ModeDir | 0o755},
		entry{name: "etc/ssl/certs", mode: fs.ModeDir | 0o755},
		entry{name: CABundlePath[1:], mode: 0o644, data: CABundle()},
		entry{name: "tmp", mode: fs.ModeDir | fs.ModeSticky | 0o777},
	), nil
}

// binaryEntries place the draforge binary.
func binaryEntries(binary []byte) []entry {
	return []entry{
		{name: "usr", mode: fs.ModeDir | 0o755},
		{name: "usr/local", mode: fs.ModeDir | 0o755},
		{name: "usr/local/bin", mode: fs.ModeDir | 0o755},
		{name: BinaryPath[1:], mode: 0o755, data: binary},
	}
}

// CABundle is Mozilla's root store as packaged by golang.org/x/crypto/x509roots/fallback
// (the version go.mod pins, so every machine writes the same bytes), PEM-encoded in the
// bundle's order. Roots the bundle only trusts with a constraint (a distrust-after date) are
// left out: a PEM file cannot carry the constraint.
func CABundle() []byte {
	var b bytes.Buffer
	b.WriteString("# Mozilla's trusted root certificates from golang.org/x/crypto/x509roots/fallback\n")
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}

// layerTar writes es as an uncompressed tar owned by root with every time set to mtime,
// so the bytes depend only on the contents.
func layerTar(es []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Mode: int64(e.mode.Perm()), ModTime: mtime, Format: tar.FormatPAX}
		if e.mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		if e.mode.IsDir() {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gzipBytes compresses b with an empty gzip header (no name, no time).
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeEntries materialises es under dir with their modes and mtime (the Dockerfile's build
// stage copies that tree into a scratch image).
func writeEntries(dir string, es []entry, mtime time.Time) error {
	for _, e := range es {
		p := filepath.Join(dir, filepath.FromSlash(e.name))
		if e.mode.IsDir() {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		} else if err := os.WriteFile(p, e.data, 0o644); err != nil {
			return err
		}
		// Chmod after creation: the umask must not change the modes, and MkdirAll ignores the sticky bit.
		if err := os.Chmod(p, e.mode.Perm()|e.mode&fs.ModeSticky); err != nil {
			return err
		}
	}
	// Directory mtimes last: creating a child changes its parent's.
	for i := len(es) - 1; i >= 0; i-- {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(es[i].name)), mtime, mtime); err != nil {
			return err
		}
	}
	return nil
}
