package simdevice

import (
	"crypto/sha256"
	"fmt"
	"testing"
)

// TestDeviceUIDUnchanged: the fmt-free deviceUID gives the identifiers published before it
// (a changed UUID would rewrite every slice of every pool on upgrade).
func TestDeviceUIDUnchanged(t *testing.T) {
	was := func(namespace, name, node string, i int) string {
		h := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%s/%d", namespace, name, node, i))
		return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	}
	for _, c := range []struct {
		ns, name, node string
		i              int
	}{{"default", "gpus", "node-1", 0}, {"", "p", "n", -1}, {"team-a", "a100", "worker-00042", 127}, {"x", "y", "z", 1 << 40}} {
		if got, want := deviceUID(c.ns, c.name, c.node, c.i), was(c.ns, c.name, c.node, c.i); got != want {
			t.Errorf("deviceUID(%q, %q, %q, %d) = %s, want %s", c.ns, c.name, c.node, c.i, got, want)
		}
	}
}
