package kubeletplugin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const (
	simName  = "sim.draforge.oaslananka"
	realName = "gpu.nvidia.com"
)

// verdictsOf runs decide and returns the refusal text per name ("" when served).
func verdictsOf(t *testing.T, in guardInput) map[string]string {
	t.Helper()
	out := map[string]string{}
	vs := decide(in)
	if len(vs) != len(in.Want) {
		t.Fatalf("%d verdicts for %d names", len(vs), len(in.Want))
	}
	for i, v := range vs {
		if v.Driver != in.Want[i] {
			t.Fatalf("verdict %d for %s, want %s", i, v.Driver, in.Want[i])
		}
		out[v.Driver] = v.String()
		if v.serve() != (v.String() == "") {
			t.Fatalf("%s: serve %v with reasons %q", v.Driver, v.serve(), v.String())
		}
	}
	return out
}

func TestDecideAllowList(t *testing.T) {
	got := verdictsOf(t, guardInput{Want: []string{realName, simName}, Allowed: allowList{simName}, Node: "n1"})
	if got[simName] != "" {
		t.Errorf("%s refused: %s", simName, got[simName])
	}
	if want := "driver name gpu.nvidia.com is not in --driver-names [sim.draforge.oaslananka]"; got[realName] != want {
		t.Errorf("%s: %q, want %q", realName, got[realName], want)
	}
	// "*" allows any name; the other checks still run (none fires here).
	if got := verdictsOf(t, guardInput{Want: []string{realName}, Allowed: allowList{anyDriverName}}); got[realName] != "" {
		t.Errorf("* refused %s: %s", realName, got[realName])
	}
}

func TestDecideSockets(t *testing.T) {
	reg := func(base string, live bool, served string) socketFile {
		return socketFile{Path: "/r/" + base, Kind: registrationSocket, Live: live, Served: served}
	}
	data := func(driver string, live bool) socketFile {
		return socketFile{Path: "/p/" + driver + "/dra.sock", Kind: dataSocket, DataDriver: driver, Live: live}
	}
	all := allowList{anyDriverName}
	for _, tc := range []struct {
		name    string
		sockets []socketFile
		marked  bool
		want    string // "" served; else a substring of the refusal
	}{
		{"nothing there", nil, false, ""},
		{"live registration socket of the name", []socketFile{reg(realName+"-reg.sock", true, realName)}, false,
			"registration socket /r/gpu.nvidia.com-reg.sock is served by a running kubelet plugin of driver gpu.nvidia.com"},
		// Rolling-update file names; the hashed form names no driver, GetInfo does.
		{"live rolling-update socket", []socketFile{reg(realName+"-0b1c-reg.sock", true, realName)}, false, "served by a running kubelet plugin"},
		{"live hashed socket", []socketFile{reg("dra-AbCdEf-reg.sock", true, realName)}, false, "/r/dra-AbCdEf-reg.sock is served"},
		{"live socket of another driver", []socketFile{reg("dra-AbCdEf-reg.sock", true, "other.example.com")}, false, ""},
		{"a CSI plugin's socket", []socketFile{reg("csi.example.com-reg.sock", true, "csi.example.com")}, false, ""},
		{"live socket that does not answer GetInfo", []socketFile{reg(realName+"-reg.sock", true, "")}, false,
			"socket /r/gpu.nvidia.com-reg.sock of driver gpu.nvidia.com accepts connections"},
		{"live data socket", []socketFile{data(realName, true)}, true, "socket /p/gpu.nvidia.com/dra.sock of driver gpu.nvidia.com accepts connections"},
		{"dead socket, directory not DRAForge's", []socketFile{reg(realName+"-reg.sock", false, "")}, false,
			"socket /r/gpu.nvidia.com-reg.sock of driver gpu.nvidia.com exists and DRAForge did not create it (no draforge-owner"},
		{"dead data socket, directory not DRAForge's", []socketFile{data(realName, false)}, false, "/p/gpu.nvidia.com/dra.sock of driver gpu.nvidia.com exists"},
		// Left by an earlier DRAForge process killed without cleaning up: replaced.
		{"dead sockets, directory DRAForge's", []socketFile{reg(realName+"-reg.sock", false, ""), data(realName, false)}, true, ""},
		// A live socket is refused even in a marked directory: someone answers on it.
		{"live socket, directory DRAForge's", []socketFile{reg(realName+"-reg.sock", true, realName)}, true, "served by a running"},
		{"this process's own socket", []socketFile{{Path: "/r/" + realName + "-reg.sock", Live: true, Served: realName, Ours: true}}, false, ""},
		// A dead socket named for a longer driver name that starts with this one is judged
		// for both: names are ambiguous once a suffix may follow.
		{"dead socket of gpu.nvidia.com-x", []socketFile{reg(realName+"-x-reg.sock", false, "")}, false, "exists and DRAForge did not create it"},
		{"dead socket of another name", []socketFile{reg("gpu.nvidia.co-reg.sock", false, "")}, false, ""},
	} {
		got := verdictsOf(t, guardInput{Want: []string{realName}, Allowed: all, Sockets: tc.sockets, Marked: map[string]bool{realName: tc.marked}})[realName]
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDecideSlices(t *testing.T) {
	slices := []nodeSlice{
		{Name: "n1-gpu.nvidia.com-x", Driver: realName},
		{Name: "sim-1", Driver: simName, Ours: true},
		{Name: "other", Driver: "other.example.com"},
	}
	got := verdictsOf(t, guardInput{Want: []string{realName, simName}, Allowed: allowList{anyDriverName}, Slices: slices, Node: "n1"})
	if got[simName] != "" {
		t.Errorf("%s refused for its own slice: %s", simName, got[simName])
	}
	want := "ResourceSlice n1-gpu.nvidia.com-x of driver gpu.nvidia.com on node n1 was not published by DRAForge (no draforge.oaslananka/sdp-uid label)"
	if !strings.HasPrefix(got[realName], want) {
		t.Errorf("%s: %q, want %q...", realName, got[realName], want)
	}
	// A foreign slice of the simulated name refuses it too.
	slices = append(slices, nodeSlice{Name: "hand-made", Driver: simName})
	if got := verdictsOf(t, guardInput{Want: []string{simName}, Allowed: allowList{simName}, Slices: slices, Node: "n1"}); !strings.Contains(got[simName], "ResourceSlice hand-made") {
		t.Errorf("hand-made slice of %s: %q", simName, got[simName])
	}
}

// Every reason is reported, each with its metric label.
func TestDecideAllReasons(t *testing.T) {
	vs := decide(guardInput{Want: []string{realName}, Allowed: allowList{simName}, Node: "n1",
		Sockets: []socketFile{{Path: "/r/" + realName + "-reg.sock", Live: true, Served: realName}},
		Slices:  []nodeSlice{{Name: "s", Driver: realName}}})
	var reasons []string
	for _, r := range vs[0].Refusals {
		reasons = append(reasons, string(r.Reason))
	}
	if strings.Join(reasons, ",") != "not-allowed,socket,foreign-slice" {
		t.Errorf("reasons %v", reasons)
	}
}

func TestAllowListValidate(t *testing.T) {
	for _, ok := range []allowList{{simName}, {simName, realName}, {anyDriverName}} {
		if err := ok.validate(); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for list, want := range map[string]string{
		"":                     "--driver-names must name at least one driver",
		"Not_A_Name":           `--driver-names: "Not_A_Name" is not a DRA driver name`,
		"*," + simName:         `"*" allows any name and cannot be combined`,
		simName + ",bad name!": `"bad name!" is not a DRA driver name`,
	} {
		var a allowList
		if list != "" {
			a = strings.Split(list, ",")
		}
		if err := a.validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", list, want, err)
		}
	}
}

func TestOwnsDataDir(t *testing.T) {
	root := t.TempDir()
	write := func(dir, file, content string) string {
		p := filepath.Join(root, dir)
		if err := os.MkdirAll(p, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, file), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	marked := filepath.Join(root, "marked")
	if err := os.MkdirAll(marked, 0o750); err != nil {
		t.Fatal(err)
	}
	if ownsDataDir(marked) {
		t.Error("an empty directory owned")
	}
	if err := markDataDir(marked); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{
		marked: true,
		// DRAForge's checkpoint without the mark (an earlier release).
		write("legacy", checkpointFile, `{"version":1,"claims":{"u":{"namespace":"ns","name":"c","devices":[]}}}`): true,
		// The kubelet checkpoint format dra-example-driver and NVIDIA's plugin write.
		write("foreign", checkpointFile, `{"checksum":123,"v1":{"preparedClaims":{}}}`): false,
		write("garbage", checkpointFile, `not json`):                                    false,
		write("nothing", "dra.sock", ``):                                                false,
	} {
		if got := ownsDataDir(dir); got != want {
			t.Errorf("%s: owned %v, want %v", filepath.Base(dir), got, want)
		}
	}
	if err := unmarkDataDir(marked); err != nil || ownsDataDir(marked) {
		t.Errorf("unmark: %v, owned %v", err, ownsDataDir(marked))
	}
	if err := unmarkDataDir(marked); err != nil {
		t.Errorf("unmark twice: %v", err)
	}
}

// A foreign plugin's checkpoint in the shared plugins directory is neither wanted nor an error
// (it used to stop the plugin: its format is not ours).
func TestWantedDriversIgnoresForeignDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, realName), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, realName, checkpointFile), []byte(`{"checksum":1,"v1":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := wantedDrivers(dir, snapshot{simName: {}})
	if err != nil || strings.Join(got, ",") != simName {
		t.Errorf("wanted %v %v", got, err)
	}
}

// fakeRegistration serves the kubelet registration API on path, answering GetInfo with name.
type fakeRegistration struct {
	registerapi.UnimplementedRegistrationServer
	name string
}

func (f fakeRegistration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: f.name}, nil
}

func serveRegistration(t *testing.T, path, name string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	registerapi.RegisterRegistrationServer(s, fakeRegistration{name: name})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
}

func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "kpg") // unix socket paths are limited to 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func TestScanSockets(t *testing.T) {
	root := shortTempDir(t)
	reg, plugins := filepath.Join(root, "r"), filepath.Join(root, "p")
	for _, d := range []string{reg, filepath.Join(plugins, realName)} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	serveRegistration(t, filepath.Join(reg, "dra-hash-reg.sock"), realName)
	// A dead socket: listened on, then closed without unlinking.
	l, err := net.Listen("unix", filepath.Join(plugins, realName, "dra.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = l.Close()
	if err := os.WriteFile(filepath.Join(reg, "README"), nil, 0o600); err != nil { // not a socket: skipped
		t.Fatal(err)
	}
	got, err := scanSockets(t.Context(), reg, plugins, []string{realName, "absent.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("sockets %+v", got)
	}
	if s := got[0]; s.Kind != registrationSocket || !s.Live || s.Served != realName || s.Ours {
		t.Errorf("registration socket %+v", s)
	}
	if s := got[1]; s.Kind != dataSocket || s.Live || s.DataDriver != realName {
		t.Errorf("dead data socket %+v", s)
	}
	if v := decide(guardInput{Want: []string{realName}, Allowed: allowList{anyDriverName}, Sockets: got}); v[0].serve() {
		t.Error("a live registration socket of the name was not refused")
	}
	// The same file recorded as this process's own is not probed and not held against it.
	fi, err := os.Stat(filepath.Join(reg, "dra-hash-reg.sock"))
	if err != nil {
		t.Fatal(err)
	}
	got, err = scanSockets(t.Context(), reg, plugins, nil, []os.FileInfo{fi})
	if err != nil || len(got) != 1 || !got[0].Ours || got[0].Live {
		t.Errorf("own socket: %+v %v", got, err)
	}
}

func TestGuardedListener(t *testing.T) {
	root := shortTempDir(t)
	var created []os.FileInfo
	g := guardedListener{created: func(fi os.FileInfo) { created = append(created, fi) }}
	path := filepath.Join(root, "x-reg.sock")

	// A live socket at the path is refused and left alone.
	serveRegistration(t, path, "x")
	if _, err := g.listen(t.Context(), path); err == nil || !strings.Contains(err.Error(), path+" accepts connections") {
		t.Fatalf("listen over a live socket: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the live socket was removed: %v", err)
	}

	// A dead file at the path is replaced; Close removes the socket it created.
	dead := filepath.Join(root, "y-reg.sock")
	if err := os.WriteFile(dead, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := g.listen(t.Context(), dead)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 1 {
		t.Fatalf("created %d", len(created))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("own socket left after Close: %v", err)
	}

	// Once another plugin has replaced the file, Close leaves the new one.
	l, err = g.listen(t.Context(), dead)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dead); err != nil {
		t.Fatal(err)
	}
	serveRegistration(t, dead, "y")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if live, served := probe(t.Context(), dead, true); !live || served != "y" {
		t.Errorf("the other plugin's socket after our Close: live %v served %q", live, served)
	}
}
