package kubeletplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
)

// checkpointFile is the prepared-claims record in the driver's plugin data directory
// (/var/lib/kubelet/plugins/<driver>/), which survives plugin restarts: unprepare must undo a
// prepare made by an earlier process (DRAPlugin.UnprepareResourceClaims), and the claim may be
// gone from the API by then. dra-example-driver keeps the same record
// (cmd/dra-example-kubeletplugin/checkpoint.go, state.go).
const checkpointFile = "checkpoint.json"

// checkpointVersion is bumped when the file's meaning changes.
const checkpointVersion = 1

// checkpoint is what is prepared on this node for one driver.
type checkpoint struct {
	Version int                          `json:"version"`
	Claims  map[types.UID]*preparedClaim `json:"claims"`
	path    string
}

// preparedClaim is one prepared claim: enough to answer a repeated prepare and to unprepare.
type preparedClaim struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []preparedDevice `json:"devices"`
}

// preparedDevice is one allocated device of the claim that this driver prepared.
type preparedDevice struct {
	Request     string     `json:"request"`
	Pool        string     `json:"pool"`
	Device      string     `json:"device"`
	AdminAccess bool       `json:"adminAccess,omitempty"`
	ShareID     *types.UID `json:"shareID,omitempty"`
	CDIDeviceID string     `json:"cdiDeviceID"`
	// NoStatus: the device's pool does not report device status, so its status.devices entry
	// is neither written at prepare nor cleared at unprepare (absent in checkpoints of releases
	// that always wrote it).
	NoStatus bool `json:"noStatus,omitempty"`
}

// reportsStatus tells whether any device of the claim has its status.devices entry written.
func (pc *preparedClaim) reportsStatus() bool {
	for _, pd := range pc.Devices {
		if !pd.NoStatus {
			return true
		}
	}
	return false
}

// loadCheckpoint reads dir's checkpoint; a missing file is an empty checkpoint, a damaged one an
// error naming the file (never silently dropped: it is the only record of what to unprepare).
func loadCheckpoint(dir string) (*checkpoint, error) {
	cp := &checkpoint{Version: checkpointVersion, Claims: map[types.UID]*preparedClaim{}, path: filepath.Join(dir, checkpointFile)}
	data, err := os.ReadFile(cp.path)
	if errors.Is(err, os.ErrNotExist) {
		return cp, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", cp.path, err)
	}
	if cp.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint %s: version %d, this plugin reads version %d", cp.path, cp.Version, checkpointVersion)
	}
	if cp.Claims == nil {
		cp.Claims = map[types.UID]*preparedClaim{}
	}
	return cp, nil
}

// save writes the checkpoint atomically (temporary file, fsync, rename), so a crash leaves
// either the old or the new record.
func (cp *checkpoint) save() error {
	data, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomically(cp.path, data)
}

func writeFileAtomically(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
