package unstructuredjson

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// stock is client-go's dynamic JSON serializer, the reference every decode is compared with.
func stock() runtime.NegotiatedSerializer {
	return dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer
}

func jsonInfo(t testing.TB, ns runtime.NegotiatedSerializer) runtime.SerializerInfo {
	for _, info := range ns.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON {
			return info
		}
	}
	t.Fatal("no JSON serializer")
	return runtime.SerializerInfo{}
}

const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n","resourceVersion":"42","generation":3,` +
	`"labels":{"a":"b"},"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":"j","uid":"u","controller":true}]},` +
	`"spec":{"priority":0,"terminationGracePeriodSeconds":30,"containers":[{"name":"c","image":"i","resources":{"requests":{"cpu":"100m"}}}]},` +
	`"status":{"phase":"Running","ratio":0.5,"big":12345678901234,"whole":2.0,"huge":1e300,"neg":-7,"empty":{},"list":[],"null":null,` +
	`"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-12-03T10:00:00Z"}]}}`

// TestObjectDecodesAsClientGo: every input decodes to what client-go's decoder gives (the same
// maps and number types, or an error), whether this package parses it or hands it on.
func TestObjectDecodesAsClientGo(t *testing.T) {
	want, fast := jsonInfo(t, stock()).Serializer, jsonInfo(t, wrap(stock())).Serializer
	for name, in := range map[string]string{
		"pod":            pod,
		"status":         `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"Expired","code":410}`,
		"list":           `{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"9"},"items":[` + pod + `]}`,
		"no kind":        `{"apiVersion":"v1","metadata":{"name":"p"}}`,
		"malformed":      `{"apiVersion":"v1","kind":"Pod",`,
		"not an object":  `["a"]`,
		"unicode escape": `{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"\u00e9\n\"q\""}}`,
	} {
		for _, into := range []func() runtime.Object{
			func() runtime.Object { return nil },
			func() runtime.Object { return &unstructured.Unstructured{} },
			func() runtime.Object { return &unstructured.UnstructuredList{} },
		} {
			wObj, wGVK, wErr := want.Decode([]byte(in), nil, into())
			gObj, gGVK, gErr := fast.Decode([]byte(in), nil, into())
			if (wErr == nil) != (gErr == nil) || wErr != nil && wErr.Error() != gErr.Error() {
				t.Fatalf("%s into %T: error %v, client-go %v", name, into(), gErr, wErr)
			}
			if wErr != nil {
				continue
			}
			if !equality.Semantic.DeepEqual(wObj, gObj) || *wGVK != *gGVK {
				t.Fatalf("%s into %T:\n got %#v %v\nwant %#v %v", name, into(), gObj, gGVK, wObj, wGVK)
			}
		}
	}
	// Number types exactly as client-go's: int64 for integers, float64 otherwise.
	u, _, err := fast.Decode([]byte(pod), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := u.(*unstructured.Unstructured).Object["status"].(map[string]any)
	if _, ok := st["big"].(int64); !ok {
		t.Fatalf("big is %T", st["big"])
	}
	if _, ok := st["ratio"].(float64); !ok {
		t.Fatalf("ratio is %T", st["ratio"])
	}
}

// TestWatchStreamDecodesAsClientGo decodes one watch stream through client-go's watch decoder
// with each serializer: the same event types and objects, including an ERROR event's Status
// and a BOOKMARK, and an invalid event type still refused. The stream comes as kube-apiserver
// writes it (one event per line) and in layouts only client-go's framer would split: blank
// lines, no final newline, events larger than the stream decoder's first buffer, spaces in the
// envelope, pretty-printed JSON.
func TestWatchStreamDecodesAsClientGo(t *testing.T) {
	big := strings.Replace(pod, `"a":"b"`, `"a":"`+strings.Repeat("x", 100<<10)+`"`, 1)
	events := []string{
		`{"type":"ADDED","object":` + pod + "}",
		`{"type":"MODIFIED","object":` + strings.Replace(pod, `"Running"`, `"Succeeded"`, 1) + "}",
		`{"type":"MODIFIED","object":` + big + "}",
		`{"type":"BOOKMARK","object":{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"50","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
		`{"type":"ERROR","object":{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"Expired","code":410}}`,
		`{ "object" : ` + pod + `, "type" : "DELETED" }`,
		`{"type":"BOGUS","object":` + pod + "}",
	}
	var pretty bytes.Buffer
	for _, e := range events {
		if err := json.Indent(&pretty, []byte(e), "", "  "); err != nil {
			t.Fatal(err)
		}
		pretty.WriteString("\n")
	}
	for name, stream := range map[string]string{
		"one per line":     strings.Join(events, "\n") + "\n",
		"blank lines":      "\n" + strings.Join(events, "\n\n  \n") + "\n\n",
		"no final newline": strings.Join(events, "\n"),
		"pretty":           pretty.String(),
	} {
		decode := func(ns runtime.NegotiatedSerializer) (types []watch.EventType, objs []runtime.Object, last error) {
			info := jsonInfo(t, ns)
			frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewBufferString(stream)))
			d := restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), info.Serializer)
			for {
				typ, obj, err := d.Decode()
				if err != nil {
					return types, objs, err
				}
				types, objs = append(types, typ), append(objs, obj)
			}
		}
		wTypes, wObjs, wErr := decode(stock())
		gTypes, gObjs, gErr := decode(wrap(stock()))
		if len(wTypes) != 6 || !equality.Semantic.DeepEqual(wTypes, gTypes) || !equality.Semantic.DeepEqual(wObjs, gObjs) {
			t.Fatalf("%s: events %v, client-go %v", name, gTypes, wTypes)
		}
		if wErr == nil || gErr == nil || wErr.Error() != gErr.Error() {
			t.Fatalf("%s: last error %v, client-go %v", name, gErr, wErr)
		}
	}
}

// splitEvent takes apart only the envelope kube-apiserver writes.
func TestSplitEvent(t *testing.T) {
	for _, c := range []struct {
		in, typ, object string
		ok              bool
	}{
		{`{"type":"ADDED","object":{"a":1}}`, "ADDED", `{"a":1}`, true},
		{" {\"type\":\"ADDED\",\"object\":{\"a\":1} }\n", "ADDED", `{"a":1}`, true},
		{`{"object":{"a":1},"type":"ADDED"}`, "", "", false},
		{`{"type":"A\"B","object":{"a":1}}`, "", "", false},
		{`{"type":"","object":{"a":1}}`, "", "", false},
		{`{"type":"ADDED","object":null}`, "", "", false},
		{`{"type":"ADDED","object":{"a":1},"x":2}`, "", "", false},
		{`{"type":"ADDED","object":{"a":1}`, "", "", false},
	} {
		typ, object, ok := splitEvent([]byte(c.in))
		if typ != c.typ || string(object) != c.object || ok != c.ok {
			t.Errorf("splitEvent(%q) = %q, %q, %v", c.in, typ, object, ok)
		}
	}
}

// BenchmarkWatchEvent decodes one pod's MODIFIED events as the dynamic client's watch does, from
// one stream (a watch is long-lived: its reader is made once).
func BenchmarkWatchEvent(b *testing.B) {
	frame := `{"type":"MODIFIED","object":` + pod + "}\n"
	for name, ns := range map[string]runtime.NegotiatedSerializer{"client-go": stock(), "unstructuredjson": wrap(stock())} {
		b.Run(name, func(b *testing.B) {
			info := jsonInfo(b, ns)
			stream := strings.NewReader(strings.Repeat(frame, b.N))
			frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(stream))
			d := restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), info.Serializer)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, _, err := d.Decode(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
