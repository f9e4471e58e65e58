package kubeletplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// CDI (Container Device Interface) specs: one transient spec file per prepared claim, named and
// shaped as dra-example-driver writes them (cmd/dra-example-kubeletplugin/cdi.go with the
// container-device-interface library's GenerateTransientSpecName: "<vendor>-<class>_<claim UID>"),
// here written as plain JSON to avoid the library. The container runtime reads them from the CDI
// directory (/var/run/cdi) when the kubelet passes the CDI device IDs of NodePrepareResources.

const (
	// cdiVersion is the CDI spec version; env-only edits need nothing newer.
	cdiVersion = "0.6.0"
	// cdiClass is the device class part of every CDI kind "<driver>/device".
	cdiClass = "device"
)

type cdiSpec struct {
	Version        string             `json:"cdiVersion"`
	Kind           string             `json:"kind"`
	Devices        []cdiDevice        `json:"devices"`
	ContainerEdits *cdiContainerEdits `json:"containerEdits,omitempty"`
}

type cdiDevice struct {
	Name           string            `json:"name"`
	ContainerEdits cdiContainerEdits `json:"containerEdits"`
}

type cdiContainerEdits struct {
	Env []string `json:"env,omitempty"`
}

// cdiKind is "<vendor>/<class>" with the driver name as vendor (a DNS name, valid as a vendor).
func cdiKind(driver string) string { return driver + "/" + cdiClass }

// cdiDeviceName is unique per claim and device, so a runtime's spec cache never hits a device
// of another claim (the advice in kubeletplugin.DRAPlugin.PrepareResourceClaims).
func cdiDeviceName(claim types.UID, i int, device string) string {
	return fmt.Sprintf("%s-%d-%s", claim, i, device)
}

// cdiDeviceID is the fully qualified "<vendor>/<class>=<name>".
func cdiDeviceID(driver, name string) string { return cdiKind(driver) + "=" + name }

// cdiSpecPath is the claim's spec file.
func cdiSpecPath(dir, driver string, claim types.UID) string {
	return filepath.Join(dir, strings.ReplaceAll(driver+"-"+cdiClass+"_"+string(claim), "/", "_")+".json")
}

// writeCDISpec writes the claim's spec atomically; writing the same spec again is harmless.
func writeCDISpec(dir, driver string, claim types.UID, spec *cdiSpec) error {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomically(cdiSpecPath(dir, driver, claim), data); err != nil {
		return fmt.Errorf("write CDI spec: %w", err)
	}
	return nil
}

// cdiSpecExists reports whether the claim's spec file is there.
func cdiSpecExists(dir, driver string, claim types.UID) bool {
	_, err := os.Stat(cdiSpecPath(dir, driver, claim))
	return err == nil
}

// removeCDISpec removes the claim's spec; a missing file is not an error (unprepare is idempotent).
func removeCDISpec(dir, driver string, claim types.UID) error {
	err := os.Remove(cdiSpecPath(dir, driver, claim))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	return nil
}
