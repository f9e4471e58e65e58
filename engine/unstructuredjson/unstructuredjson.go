// Package unstructuredjson gives the dynamic client a JSON decoder that reads each object's
// bytes twice (validate, parse) instead of client-go's four to six: its serializer scans a
// watch event's envelope and its object for apiVersion and kind, validates, then hands the
// bytes to Unstructured's UnmarshalJSON, which validates and parses again with encoding/json.
// A watch stream is split into events at newlines and each event's envelope taken apart
// without reading the object, where client-go scans every event twice more to do the same.
// The machines' watches of claims, bound pods, simulated nodes and Leases are JSON
// (unstructured objects have no protobuf form), and decoding them was a fifth of the
// controller's CPU with thousands of pods. Anything this decoder does not handle the same way
// (lists, kinds client-go decodes typed such as a Status, objects without apiVersion or kind,
// typed targets, malformed input) goes to client-go's decoder.
package unstructuredjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	kjson "sigs.k8s.io/json"
)

// Client is a dynamic client with this package's JSON decoder that also hands out its REST
// client, for writes whose answer the caller does not decode (see engine's writer).
type Client struct {
	*dynamic.DynamicClient
	rest rest.Interface
}

// RESTClient is the client every request of c goes through.
func (c *Client) RESTClient() rest.Interface { return c.rest }

// NewDynamicClient is dynamic.NewForConfig with this package's JSON decoder.
func NewDynamicClient(c *rest.Config) (*Client, error) {
	h, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	cfg := dynamic.ConfigFor(c)
	// As dynamic.NewForConfigAndClient: every request sets its own absolute path.
	cfg.GroupVersion = nil
	cfg.APIPath = "/if-you-see-this-search-for-the-break"
	cfg.NegotiatedSerializer = wrap(cfg.NegotiatedSerializer)
	rc, err := rest.UnversionedRESTClientForConfigAndClient(cfg, h)
	if err != nil {
		return nil, err
	}
	return &Client{DynamicClient: dynamic.New(rc), rest: rc}, nil
}

// wrap returns ns with its JSON decoders replaced by this package's (encoders unchanged).
func wrap(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	infos := append([]runtime.SerializerInfo(nil), ns.SupportedMediaTypes()...)
	for i, info := range infos {
		if info.MediaType != runtime.ContentTypeJSON {
			continue
		}
		info.Serializer = objectSerializer{info.Serializer}
		if info.StreamSerializer != nil {
			stream := *info.StreamSerializer
			stream.Serializer = eventSerializer{stream.Serializer}
			stream.Framer = lineFramer{stream.Framer}
			info.StreamSerializer = &stream
		}
		infos[i] = info
	}
	return negotiated{NegotiatedSerializer: ns, infos: infos}
}

type negotiated struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func (n negotiated) SupportedMediaTypes() []runtime.SerializerInfo { return n.infos }

// objectSerializer decodes an object into *unstructured.Unstructured.
type objectSerializer struct{ runtime.Serializer }

func (s objectSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	u, ok := into.(*unstructured.Unstructured)
	if !ok && into != nil {
		return s.Serializer.Decode(data, defaults, into)
	}
	obj, err := parseObject(data)
	if err != nil {
		return s.Serializer.Decode(data, defaults, into)
	}
	if u == nil {
		u = &unstructured.Unstructured{}
	}
	u.Object = obj
	gvk := u.GroupVersionKind()
	return u, &gvk, nil
}

// errNotObject sends input this package does not decode to client-go's decoder.
var errNotObject = errors.New("not a single object with apiVersion and kind")

// parseObject parses data, a JSON object with apiVersion and kind that is not a list, into the map
// unstructured.Unstructured holds, as unstructured.UnstructuredJSONScheme would: integers as
// int64, other numbers as float64.
func parseObject(data []byte) (map[string]any, error) {
	var m map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &m); err != nil {
		return nil, err
	}
	kind, _ := m["kind"].(string)
	apiVersion, _ := m["apiVersion"].(string)
	if kind == "" || apiVersion == "" {
		return nil, errNotObject
	}
	// A list's items become an UnstructuredList in client-go's decoder, and the kinds of its
	// scheme (a v1 Status, as in a watch's ERROR event) typed objects.
	if _, isList := m["items"]; isList || metaKinds.Recognizes(schema.FromAPIVersionAndKind(apiVersion, kind)) {
		return nil, errNotObject
	}
	return m, nil
}

// metaKinds holds what client-go's dynamic decoder decodes typed (its basicScheme).
var metaKinds = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}()

// eventSerializer decodes a watch event's envelope, keeping its object's bytes for the object
// decoder.
type eventSerializer struct{ runtime.Serializer }

func (s eventSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return s.Serializer.Decode(data, defaults, into)
	}
	typ, object, ok := splitEvent(data)
	if !ok {
		var raw struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal(data, &raw); err != nil || raw.Type == "" {
			return s.Serializer.Decode(data, defaults, into)
		}
		typ, object = raw.Type, raw.Object
	}
	// A copy: the stream decoder reuses its buffer for the next frame.
	ev.Type, ev.Object = typ, runtime.RawExtension{Raw: bytes.Clone(object)}
	gvk := metav1.SchemeGroupVersion.WithKind("WatchEvent")
	return ev, &gvk, nil
}

// splitEvent takes a watch event apart as kube-apiserver writes it, {"type":"T","object":{…}},
// without reading the object's bytes: the object decoder validates and parses them next
// (an object with anything after it fails there). Any other layout is not split.
func splitEvent(data []byte) (typ string, object []byte, ok bool) {
	const head, mid = `{"type":"`, `","object":`
	rest, found := bytes.CutPrefix(bytes.TrimSpace(data), []byte(head))
	if !found {
		return "", nil, false
	}
	i := bytes.IndexByte(rest, '"')
	if i <= 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
		return "", nil, false
	}
	typ, rest = string(rest[:i]), rest[i:]
	if rest, found = bytes.CutPrefix(rest, []byte(mid)); !found {
		return "", nil, false
	}
	rest, found = bytes.CutSuffix(rest, []byte("}"))
	object = bytes.TrimSpace(rest)
	if !found || len(object) < 2 || object[0] != '{' || object[len(object)-1] != '}' {
		return "", nil, false
	}
	return typ, object, true
}

// lineFramer frames a watch stream at newlines when it is one event per line, as
// kube-apiserver writes it (compact JSON, each event ending in "\n"; a newline inside a JSON
// string is always escaped). client-go's JSON framer finds an event's end by running
// encoding/json's scanner over every byte: one more full read of each event. A stream whose
// first line is not a whole object (pretty-printed JSON) goes to client-go's framer.
type lineFramer struct{ runtime.Framer }

func (f lineFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &lineReader{framer: f.Framer, closer: r, in: bufio.NewReaderSize(r, 16<<10)}
}

type lineReader struct {
	framer runtime.Framer
	closer io.Closer
	in     *bufio.Reader
	// started is set once the first line decided the mode; fallback is client-go's reader
	// when that line was not a whole object.
	started  bool
	fallback io.ReadCloser
	// rest is what of the current frame the caller's buffer had no room for yet.
	rest []byte
	long []byte
}

func (l *lineReader) Read(p []byte) (int, error) {
	if l.fallback != nil {
		return l.fallback.Read(p)
	}
	if len(l.rest) == 0 {
		line, err := l.next()
		if err != nil {
			return 0, err
		}
		if !l.started {
			l.started = true
			if line[0] != '{' || line[len(line)-1] != '}' {
				// Replay the line and whatever the buffer holds to client-go's framer.
				l.fallback = l.framer.NewFrameReader(readCloser{io.MultiReader(bytes.NewReader(bytes.Clone(line)), l.in), l.closer})
				return l.fallback.Read(p)
			}
		}
		l.rest = line
	}
	// As client-go's framers: a frame larger than p comes in pieces, each but the last with
	// io.ErrShortBuffer (the stream decoder then grows its buffer and reads on).
	n := copy(p, l.rest)
	l.rest = l.rest[n:]
	if len(l.rest) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// next returns the next line that is not blank, without its surrounding space. It stays valid
// until the following call.
func (l *lineReader) next() ([]byte, error) {
	for {
		line, err := l.in.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			l.long = append(l.long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = l.in.ReadSlice('\n')
				l.long = append(l.long, line...)
			}
			line = l.long
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		// The last event may lack its newline: return it, and io.EOF on the next call.
		if t := bytes.TrimSpace(line); len(t) > 0 {
			return t, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (l *lineReader) Close() error { return l.closer.Close() }

type readCloser struct {
	io.Reader
	io.Closer
}
