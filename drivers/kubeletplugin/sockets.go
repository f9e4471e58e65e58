package kubeletplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// ownerMarkFile in <plugins-dir>/<driver>/ says DRAForge uses that data directory: written
// before the driver's sockets are created, removed when it is unregistered cleanly. A socket
// there (or the driver's registration socket) that nothing answers on was then left by an
// earlier DRAForge process, and may be replaced.
const ownerMarkFile = "draforge-owner"

// probeTimeout bounds each connection and GetInfo to a socket found on the node.
const probeTimeout = time.Second

func markDataDir(dir string) error {
	return writeFileAtomically(filepath.Join(dir, ownerMarkFile),
		[]byte("This directory is used by draforge kubelet-plugin (a simulated DRA driver).\n"))
}

func unmarkDataDir(dir string) error {
	if err := os.Remove(filepath.Join(dir, ownerMarkFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ownsDataDir tells whether dir is DRAForge's: it carries the mark, or its checkpoint.json is
// exactly DRAForge's format (a plugin of an earlier release, before the mark). Another driver's
// directory of the same name (dra-example-driver and NVIDIA's keep a checkpoint.json too, in
// the kubelet's checkpoint format) is not.
func ownsDataDir(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, ownerMarkFile)); err == nil {
		return true
	}
	data, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if err != nil {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cp checkpoint
	return dec.Decode(&cp) == nil && cp.Version == checkpointVersion && cp.Claims != nil
}

// scanSockets lists the sockets the guard judges: every socket in the registration directory,
// and those in the data directories of dataDrivers (the names not yet running: a running
// driver's data socket is its own). own are the files this process's helpers created.
func scanSockets(ctx context.Context, registryDir, pluginsDir string, dataDrivers []string, own []os.FileInfo) ([]socketFile, error) {
	var out []socketFile
	add := func(dir string, kind socketKind, driver string) error {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() || e.Type()&os.ModeSocket == 0 && !strings.HasSuffix(e.Name(), ".sock") {
				continue
			}
			s := socketFile{Path: filepath.Join(dir, e.Name()), Kind: kind, DataDriver: driver}
			if fi, err := os.Stat(s.Path); err == nil && sameAsAny(fi, own) {
				s.Ours = true
			} else {
				s.Live, s.Served = probe(ctx, s.Path, kind == registrationSocket)
			}
			out = append(out, s)
		}
		return nil
	}
	if err := add(registryDir, registrationSocket, ""); err != nil {
		return nil, err
	}
	for _, d := range dataDrivers {
		if err := add(filepath.Join(pluginsDir, d), dataSocket, d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func sameAsAny(fi os.FileInfo, own []os.FileInfo) bool {
	for _, o := range own {
		if os.SameFile(fi, o) {
			return true
		}
	}
	return false
}

// probe connects to a socket; a registration socket is asked for its driver name as the
// kubelet's plugin watcher asks (GetInfo).
func probe(ctx context.Context, path string, registration bool) (live bool, served string) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
	if err != nil {
		return false, ""
	}
	_ = conn.Close()
	if !registration {
		return true, ""
	}
	cc, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return true, ""
	}
	defer func() { _ = cc.Close() }()
	info, err := registerapi.NewRegistrationClient(cc).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return true, ""
	}
	return true, info.Name
}

// guardedListener creates the helper's sockets in place of its default listener, which removes
// whatever is at the path first (kubeletplugin endpoint.go). It refuses a path some process
// still answers on (a plugin that started since the guard looked), replaces only a dead
// socket (the guard has judged those), and on Close removes the path only while it is still
// the file it created, never a socket another plugin has put there since.
type guardedListener struct {
	created func(os.FileInfo) // records the socket as this process's own
}

func (g guardedListener) listen(ctx context.Context, path string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		if live, _ := probe(ctx, path, false); live {
			return nil, fmt.Errorf("%s accepts connections: another plugin serves it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove dead socket: %w", err)
		}
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	fi, err := os.Stat(path)
	if err != nil {
		_ = ul.Close()
		return nil, err
	}
	if g.created != nil {
		g.created(fi)
	}
	return &ownSocket{UnixListener: ul, path: path, fi: fi}, nil
}

type ownSocket struct {
	*net.UnixListener
	path string
	fi   os.FileInfo
}

func (s *ownSocket) Close() error {
	err := s.UnixListener.Close()
	if fi, statErr := os.Stat(s.path); statErr == nil && os.SameFile(fi, s.fi) {
		if rmErr := os.Remove(s.path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
	}
	return err
}
