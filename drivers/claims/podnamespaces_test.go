package claims

import (
	"context"
	"errors"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/draforge/draforge/drivers/podnamespaces"
	"github.com/draforge/draforge/engine"
)

// With --pod-namespaces the claim machine creates no allocation pod outside the listed
// namespaces (the chart grants pod create only there) and says why, naming the flag.
func TestCreatePodOnlyInPodNamespaces(t *testing.T) {
	kube := fake.NewClientset()
	set, err := podnamespaces.Parse([]string{"team-a"})
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{kube: kube, PodNamespaces: set}
	for _, tc := range []struct {
		ns      string
		created bool
	}{{"team-a", true}, {"team-b", false}} {
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "c", UID: types.UID("uid-" + tc.ns)}}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(claim)
		if err != nil {
			t.Fatal(err)
		}
		err = d.createPod(context.Background(), &unstructured.Unstructured{Object: u})
		pods, lerr := kube.CoreV1().Pods(tc.ns).List(context.Background(), metav1.ListOptions{})
		if lerr != nil {
			t.Fatal(lerr)
		}
		if tc.created {
			if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "draforge-alloc-uid-team-a" {
				t.Errorf("%s: createPod = %v, pods %d", tc.ns, err, len(pods.Items))
			}
			continue
		}
		var p *engine.PendingError
		if !errors.As(err, &p) || p.Reason != podnamespaces.Reason ||
			!strings.Contains(p.Message, "cannot create allocation pod draforge-alloc-uid-team-b") || !strings.Contains(p.Message, "--pod-namespaces (team-a)") {
			t.Errorf("%s: createPod = %v, want pending %s naming the pod and the flag", tc.ns, err, podnamespaces.Reason)
		}
		if len(pods.Items) != 0 {
			t.Errorf("%s: an allocation pod was created outside --pod-namespaces", tc.ns)
		}
	}
}
