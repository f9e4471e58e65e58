// Package unstructuredjson gives the dynamic client a JSON decoder that reads each object's
// bytes twice (validate, parse) instead of client-go's four to six: its serializer scans a
// watch event's envelope and its object for apiVersion and kind, validates, then hands the
// bytes to Unstructured's UnmarshalJSON, which validates and parses again with encoding/json.
// The machines' watches of claims, bound pods, simulated nodes and Leases are JSON
// (unstructured objects have no protobuf form), and decoding them was a fifth of the
// controller's CPU with thousands of pods. Anything this decoder does not handle the same way
// (lists, kinds client-go decodes typed such as a Status, objects without apiVersion or kind,
// typed targets, malformed input) goes to client-go's decoder.
package unstructuredjson

import (
	"encoding/json"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	kjson "sigs.k8s.io/json"
)

// NewDynamicClient is dynamic.NewForConfig with this package's JSON decoder.
func NewDynamicClient(c *rest.Config) (*dynamic.DynamicClient, error) {
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
	return dynamic.New(rc), nil
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
	var raw struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(data, &raw); err != nil || raw.Type == "" {
		return s.Serializer.Decode(data, defaults, into)
	}
	// RawMessage copied the bytes: the stream decoder reuses its buffer for the next frame.
	ev.Type, ev.Object = raw.Type, runtime.RawExtension{Raw: raw.Object}
	gvk := metav1.SchemeGroupVersion.WithKind("WatchEvent")
	return ev, &gvk, nil
}
