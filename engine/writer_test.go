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
