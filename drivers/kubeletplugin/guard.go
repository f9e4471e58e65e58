package kubeletplugin

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/draforge/draforge/drivers/simdevice"
)

// The guard decides which driver names this process may serve on its node. The kubelet keys
// DRA plugins by driver name, and the upstream helper removes whatever socket it finds at its
// paths before listening (k8s.io/dynamic-resource-allocation/kubeletplugin endpoint.go,
// listen: "Remove stale sockets"), so registering a name a real driver serves on the node would
// take its place. A name is refused when
//   - it is not in --driver-names, or
//   - a socket of that name exists that this process did not create: a registration socket in
//     the kubelet's registry directory (<name>-reg.sock, the rolling-update forms
//     <name>-<suffix>-reg.sock, or any socket whose GetInfo answers the name) or a socket in
//     <plugins-dir>/<name>/; a socket nothing answers on is only tolerated when the data
//     directory carries DRAForge's mark (an earlier DRAForge process died without removing it), or
//   - a ResourceSlice of that driver on this node lacks DRAForge's sdp-uid label: another
//     driver publishes devices of that name here.
// decide is the pure verdict; sockets.go and the inventory gather its inputs.

// anyDriverName in --driver-names allows every name (the guard's other checks still apply).
const anyDriverName = "*"

// allowList is --driver-names.
type allowList []string

func (a allowList) allows(name string) bool {
	return slices.Contains(a, anyDriverName) || slices.Contains(a, name)
}

func (a allowList) validate() error {
	if len(a) == 0 {
		return fmt.Errorf("--driver-names must name at least one driver (or %q for any)", anyDriverName)
	}
	var errs []error
	for _, n := range a {
		if n == anyDriverName {
			if len(a) > 1 {
				errs = append(errs, fmt.Errorf("--driver-names: %q allows any name and cannot be combined with others", anyDriverName))
			}
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--driver-names: %q is not a DRA driver name: %s", n, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// socketKind says where a socket was found.
type socketKind int

const (
	registrationSocket socketKind = iota // in --registry-dir
	dataSocket                           // in --plugins-dir/<driver>/
)

// socketFile is a file at a socket location: a unix socket, or anything else named *.sock.
type socketFile struct {
	Path string
	Kind socketKind
	// DataDriver is the <driver> directory a dataSocket is in.
	DataDriver string
	// Live: a connection to it succeeded (a process listens).
	Live bool
	// Served is the driver name a live registration socket answered GetInfo with; "" when it
	// did not answer.
	Served string
	// Ours: the socket of a helper this process runs (the very file it created).
	Ours bool
}

// concerns tells whether the socket belongs to a plugin of driver name.
func (s socketFile) concerns(name string) bool {
	if s.Served != "" {
		return s.Served == name
	}
	if s.Kind == dataSocket {
		return s.DataDriver == name
	}
	base := filepath.Base(s.Path)
	return base == name+"-reg.sock" || strings.HasPrefix(base, name+"-") && strings.HasSuffix(base, "-reg.sock")
}

// nodeSlice is a ResourceSlice whose spec.nodeName is this node.
type nodeSlice struct {
	Name   string
	Driver string
	// Ours: it carries DRAForge's sdp-uid label (the controller published it).
	Ours bool
}

// refusalReason is the metric label of a refusal.
type refusalReason string

const (
	reasonNotAllowed refusalReason = "not-allowed"
	reasonSocket     refusalReason = "socket"
	reasonSlice      refusalReason = "foreign-slice"
)

type refusal struct {
	Reason refusalReason
	Detail string
}

// verdict is the guard's answer for one driver name: served when Refusals is empty.
type verdict struct {
	Driver   string
	Refusals []refusal
}

func (v verdict) serve() bool { return len(v.Refusals) == 0 }

// String is the refusal for the log: every reason, in order.
func (v verdict) String() string {
	parts := make([]string, 0, len(v.Refusals))
	for _, r := range v.Refusals {
		parts = append(parts, r.Detail)
	}
	return strings.Join(parts, "; ")
}

// guardInput is what the guard knows about the node.
type guardInput struct {
	Want    []string
	Allowed allowList
	Sockets []socketFile
	Slices  []nodeSlice
	// Marked: the driver's data directory carries DRAForge's mark (see ownsDataDir).
	Marked map[string]bool
	Node   string
}

// decide gives a verdict for every wanted name, in the order of in.Want.
func decide(in guardInput) []verdict {
	out := make([]verdict, 0, len(in.Want))
	for _, name := range in.Want {
		v := verdict{Driver: name}
		if !in.Allowed.allows(name) {
			v.Refusals = append(v.Refusals, refusal{reasonNotAllowed,
				fmt.Sprintf("driver name %s is not in --driver-names [%s]", name, strings.Join(in.Allowed, ", "))})
		}
		for _, s := range in.Sockets {
			if s.Ours || !s.concerns(name) {
				continue
			}
			switch {
			case s.Live && s.Served != "":
				v.Refusals = append(v.Refusals, refusal{reasonSocket,
					fmt.Sprintf("registration socket %s is served by a running kubelet plugin of driver %s", s.Path, s.Served)})
			case s.Live:
				v.Refusals = append(v.Refusals, refusal{reasonSocket,
					fmt.Sprintf("socket %s of driver %s accepts connections: another process serves it", s.Path, name)})
			case !in.Marked[name]:
				v.Refusals = append(v.Refusals, refusal{reasonSocket,
					fmt.Sprintf("socket %s of driver %s exists and DRAForge did not create it (no %s in its data directory): another plugin of that name may be restarting",
						s.Path, name, ownerMarkFile)})
			}
		}
		for _, s := range in.Slices {
			if s.Driver == name && !s.Ours {
				v.Refusals = append(v.Refusals, refusal{reasonSlice,
					fmt.Sprintf("ResourceSlice %s of driver %s on node %s was not published by DRAForge (no %s label): another driver serves that name here",
						s.Name, name, in.Node, simdevice.LabelSDPUID)})
			}
		}
		out = append(out, v)
	}
	return out
}
