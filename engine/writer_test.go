package engine

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/draforge/draforge/engine/unstructuredjson"
)

// TestPatchRV: through the REST client, a write goes to the object's path with the patch
// options as query parameters, and only the answer's resourceVersion is read; an error answer
// is the API error.
func TestPatchRV(t *testing.T) {
	type request struct{ method, path, query, contentType, body string }
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(b)})
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/v1/namespaces/ns/pods/gone/status" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"pods \"gone\" not found"}`)
			return
		}
		_, _ = io.WriteString(w, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"n1","resourceVersion":"4711"},"spec":{"holderIdentity":"n1"}}`)
	}))
	defer srv.Close()
	client, err := unstructuredjson.NewDynamicClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	rv, err := patchRV(t.Context(), client, leases, "kube-node-lease", "n1", types.ApplyPatchType, []byte(`{"spec":{}}`),
		metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)})
	if err != nil || rv != "4711" {
		t.Fatalf("patchRV: %q, %v; want 4711", rv, err)
	}
	want := request{"PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", "fieldManager=" + FieldManager + "&force=true",
		string(types.ApplyPatchType), `{"spec":{}}`}
	if got[0] != want {
		t.Errorf("request %+v\nwant %+v", got[0], want)
	}

	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	_, err = patchRV(t.Context(), client, pods, "ns", "gone", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
	if !apierrors.IsNotFound(err) {
		t.Errorf("error %v, want NotFound", err)
	}
	if got[1].path != "/api/v1/namespaces/ns/pods/gone/status" || got[1].query != "" {
		t.Errorf("request %+v", got[1])
	}
}

// TestAnswerResourceVersion: the object's own metadata.resourceVersion, wherever metadata and
// the field sit, never one of a nested object; malformed answers are errors.
func TestAnswerResourceVersion(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":"u","resourceVersion":"42","labels":{"a":"b"}},"status":{}}`, "42"},
		{`{"spec":{"metadata":{"resourceVersion":"1"}},"kind":"Pod","metadata":{"annotations":{"resourceVersion":"2"},"resourceVersion":"3"}}`, "3"},
		{`{"status":{"x":[1,{"resourceVersion":"9"}]},"metadata":{"name":"p"}}`, ""},
		{`{"kind":"Pod"}`, ""},
	} {
		got, err := answerResourceVersion([]byte(c.raw))
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
	for _, raw := range []string{``, `[]`, `{"metadata":"x"}`, `{"metadata":{"resourceVersion":7}}`, `{"kind":`} {
		if rv, err := answerResourceVersion([]byte(raw)); err == nil {
			t.Errorf("%q: %q and no error", raw, rv)
		}
	}
}

// BenchmarkAnswerResourceVersion reads the resourceVersion of a Running pod as the API server
// answers its status patch.
func BenchmarkAnswerResourceVersion(b *testing.B) {
	raw := []byte(runningPodAnswer)
	for b.Loop() {
		if rv, err := answerResourceVersion(raw); err != nil || rv != "812" {
			b.Fatal(rv, err)
		}
	}
}

const runningPodAnswer = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"wl-1","generateName":"wl-","namespace":"bench-wl","uid":"6f1c2c4e-7d7a-4c1e-9a55-0f3f1e0b9c11","resourceVersion":"812","creationTimestamp":"2026-12-05T21:12:37Z","labels":{"app":"wl"},"managedFields":[{"manager":"kube-scheduler","operation":"Update","apiVersion":"v1","time":"2026-12-05T21:12:38Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"PodScheduled\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}}}},"subresource":"status"},{"manager":"draforge","operation":"Update","apiVersion":"v1","time":"2026-12-05T21:12:39Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:startTime":{}}},"subresource":"status"}]},"spec":{"containers":[{"name":"c","image":"registry.k8s.io/pause:3.10","resources":{"claims":[{"name":"gpu"}]},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","nodeName":"node-17","securityContext":{},"schedulerName":"default-scheduler","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"wl-gpu"}]},"status":{"phase":"Running","conditions":[{"type":"PodReadyToStartContainers","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-12-05T21:12:39Z"},{"type":"Initialized","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-12-05T21:12:39Z"},{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-12-05T21:12:39Z"},{"type":"ContainersReady","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-12-05T21:12:39Z"},{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-12-05T21:12:38Z"}],"hostIP":"10.0.0.17","hostIPs":[{"ip":"10.0.0.17"}],"podIP":"10.244.17.3","podIPs":[{"ip":"10.244.17.3"}],"startTime":"2026-12-05T21:12:39Z","containerStatuses":[{"name":"c","state":{"running":{"startedAt":"2026-12-05T21:12:39Z"}},"lastState":{},"ready":true,"restartCount":0,"image":"registry.k8s.io/pause:3.10","imageID":"","containerID":"draforge://6f1c2c4e-0","started":true}],"qosClass":"BestEffort","resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"wl-1-gpu-x7k2p"}]}}`
