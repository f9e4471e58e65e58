package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// restClienter is a dynamic client that hands out its REST client
// (unstructuredjson.Client).
type restClienter interface {
	RESTClient() rest.Interface
}

// patchRV merge-patches (or applies) an object and returns the resourceVersion the API server
// answered with. The answer is the whole object, of which the engine reads nothing else: when
// the dynamic client hands out its REST client the answer is not decoded into an object (for a
// Lease renewal or a pod's status that decoding was a third of the write's CPU). Fake clients
// (unit tests) go through the dynamic client.
func patchRV(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, namespace, name string,
	pt types.PatchType, body []byte, opts metav1.PatchOptions, subresources ...string) (string, error) {
	rc, ok := client.(restClienter)
	if !ok {
		out, err := client.Resource(gvr).Namespace(namespace).Patch(ctx, name, pt, body, opts, subresources...)
		if err != nil {
			return "", err
		}
		return out.GetResourceVersion(), nil
	}
	raw, err := rc.RESTClient().Patch(pt).
		AbsPath(append(urlSegments(gvr, namespace, name), subresources...)...).
		Body(body).
		SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).
		Do(ctx).Raw()
	if err != nil {
		return "", err
	}
	return answerResourceVersion(raw)
}

// answerResourceVersion reads metadata.resourceVersion of a JSON object and stops there: the
// API server writes apiVersion, kind and metadata first, and of metadata name, namespace and
// uid before resourceVersion (ObjectMeta's field order), so a pod's status, its spec and its
// managed fields are never scanned (decoding the whole answer into a struct still scanned
// it all: a tenth of the pod machine's CPU). Any other order is still read correctly.
func answerResourceVersion(raw []byte) (string, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	for _, key := range []string{"metadata", "resourceVersion"} {
		if found, err := findKey(d, key); err != nil || !found {
			return "", err
		}
	}
	var rv string
	err := d.Decode(&rv)
	return rv, err
}

// findKey reads into the object that comes next in d up to key, skipping the values of the
// keys before it; found is false when the object has no such key.
func findKey(d *json.Decoder, key string) (found bool, err error) {
	if err := enterObject(d); err != nil {
		return false, err
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return false, err
		}
		if k == key {
			return true, nil
		}
		if err := skipValue(d); err != nil {
			return false, err
		}
	}
	return false, nil
}

// enterObject reads the '{' that opens an object.
func enterObject(d *json.Decoder) error {
	t, err := d.Token()
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		return fmt.Errorf("answer: %v where an object was expected", t)
	}
	return nil
}

// skipValue reads past the next value, however deep.
func skipValue(d *json.Decoder) error {
	var v json.RawMessage
	return d.Decode(&v)
}

// urlSegments is the path of an object, as the dynamic client builds it.
func urlSegments(gvr schema.GroupVersionResource, namespace, name string) []string {
	url := []string{"api"}
	if gvr.Group != "" {
		url = []string{"apis", gvr.Group}
	}
	url = append(url, gvr.Version)
	if namespace != "" {
		url = append(url, "namespaces", namespace)
	}
	return append(url, gvr.Resource, name)
}
