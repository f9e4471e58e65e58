package bench

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// CountingProxy sits between one node agent (DRAForge's controller or KWOK) and kube-apiserver
// and counts every request it forwards by verb and resource, so both agents are counted the same
// way whatever client library they use. Watches are counted once, when opened.
type CountingProxy struct {
	// Kubeconfig points at the proxy (TLS on loopback, no credentials); the proxy
	// authenticates upstream as the cluster admin.
	Kubeconfig string

	rp     *httputil.ReverseProxy
	srv    *httptest.Server
	mu     sync.Mutex
	counts Counts
}

// NewCountingProxy starts a proxy to the cluster whose certificates are in clusterDir and
// writes its kubeconfig into a new file in dir.
func NewCountingProxy(clusterDir, server, dir string) (*CountingProxy, error) {
	up, err := url.Parse(server)
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(clusterDir, "admin.crt"), filepath.Join(clusterDir, "admin.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(clusterDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	p := &CountingProxy{rp: httputil.NewSingleHostReverseProxy(up), counts: Counts{}}
	p.rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots},
		ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 256}
	p.rp.FlushInterval = -1 // watches stream
	// TLS with HTTP/2, as kube-apiserver serves: every client multiplexes its requests and
	// watches over one connection, as it would in a cluster. Over plain HTTP it spoke
	// HTTP/1.1, one request per connection, and an agent with more requests in flight than
	// client-go keeps idle connections (25) dialled new ones all the time.
	p.srv = httptest.NewUnstartedServer(p)
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	// A file of its own: proxies made one after another in the same dir (one per agent) must
	// not share one, or every agent started afterwards talks through the last proxy.
	f, err := os.CreateTemp(dir, "proxy-kubeconfig-")
	if err == nil {
		p.Kubeconfig = f.Name()
		err = f.Close()
	}
	if err == nil {
		err = clientcmd.WriteToFile(*cfg, p.Kubeconfig)
	}
	if err != nil {
		p.srv.Close()
		return nil, err
	}
	return p, nil
}

// Close stops the proxy; open watches end (Close alone would wait for them).
func (p *CountingProxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

func (p *CountingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := Classify(r.Method, r.URL.Path, r.URL.Query().Get("watch"))
	p.mu.Lock()
	p.counts[key]++
	p.mu.Unlock()
	p.rp.ServeHTTP(w, r)
}

// Counts returns a copy of the counts so far.
func (p *CountingProxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

// Counts are requests per "<verb> <resource>[/<subresource>]", e.g. "patch pods/status".
type Counts map[string]int

// Sub returns c - o per key, dropping zeros.
func (c Counts) Sub(o Counts) Counts {
	out := Counts{}
	for k, v := range c {
		if d := v - o[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Total is the number of requests; Writes the number of create, update, patch and delete
// requests.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Writes counts the mutating requests.
func (c Counts) Writes() int {
	n := 0
	for k, v := range c {
		switch verb, _, _ := strings.Cut(k, " "); verb {
		case "create", "update", "patch", "delete", "deletecollection":
			n += v
		}
	}
	return n
}

// Resource counts the requests on resource (as the keys name it: "leases",
// "resourceclaims/status"), whatever their verb: KWOK updates Leases, the node machine patches
// them.
func (c Counts) Resource(resource string) int {
	n := 0
	for k, v := range c {
		if _, res, _ := strings.Cut(k, " "); res == resource {
			n += v
		}
	}
	return n
}

// String lists the counts, largest first.
func (c Counts) String() string {
	keys := slices.Collect(maps.Keys(c))
	slices.SortFunc(keys, func(a, b string) int {
		if c[a] != c[b] {
			return c[b] - c[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, c[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Classify names a request as kube-apiserver's request info does: the verb (get, list, watch,
// create, update, patch, delete, deletecollection) and the resource with its subresource.
// Paths outside /api and /apis resources (discovery, /version, /healthz) are "<verb>
// discovery". watch is the request's watch query parameter.
func Classify(method, path, watch string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// Strip the prefix: /api/v1 or /apis/<group>/<version>.
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		parts = nil
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		// /namespaces/<ns> is itself the namespaces resource.
		if len(parts) == 2 {
			parts = []string{"namespaces", parts[1]}
		} else {
			parts = parts[2:]
		}
	}
	if len(parts) == 0 {
		return strings.ToLower(method) + " discovery"
	}
	resource, named := parts[0], len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	var verb string
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch == "true" || watch == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(method)
	}
	return verb + " " + resource
}
