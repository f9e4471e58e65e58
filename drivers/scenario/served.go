package scenario

import (
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/draforge/draforge/drivers/gvr"
)

// podGroups are Kubernetes 1.37's PodGroups (GenericWorkload), not served by default.
var podGroups = gvr.PodGroups

// Kueue's objects (kueue.x-k8s.io/v1beta2), served where Kueue is installed.
var (
	resourceFlavors = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}
	clusterQueues   = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
	localQueues     = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
)

const needsKueue = "install Kueue (v0.19 or later serves v1beta2): the local control plane's kueue profile " +
	"(go tool task demo:up PROFILE=kueue) runs Kueue " + "with its CRDs and webhooks"

// needs says how a cluster comes to serve a resource scenarios may declare that is not always
// served.
var needs = map[schema.GroupVersionResource]string{
	gvr.SimulatedDevicePools: "install DRAForge's CRDs (deploy/crds, or the Helm chart)",
	podGroups: "PodGroups need kube-apiserver's --runtime-config " +
		"scheduling.k8s.io/v1beta1=true and the GenericWorkload feature gate on kube-apiserver, kube-scheduler and " +
		"kube-controller-manager (DRAWorkloadResourceClaims too for their claims): the local control plane's dra-all profile " +
		"(go tool task demo:up PROFILE=dra-all)",
	resourceFlavors: needsKueue,
	clusterQueues:   needsKueue,
	localQueues:     needsKueue,
}

// Unserved checks, before anything is applied, that the API server serves every object's
// resource, and a PodGroup for each pod that names one: an unserved field would be dropped
// silently. The error names each file and document and what would serve it.
func Unserved(disc discovery.DiscoveryInterface, objs []Object) error {
	served := map[schema.GroupVersionResource]bool{}
	isServed := func(r schema.GroupVersionResource) (bool, error) {
		if ok, known := served[r]; known {
			return ok, nil
		}
		list, err := disc.ServerResourcesForGroupVersion(r.GroupVersion().String())
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("discover %s: %w", r.GroupVersion(), err)
		}
		ok := err == nil && list != nil && slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == r.Resource })
		served[r] = ok
		return ok, nil
	}
	var errs []error
	for _, o := range objs {
		r := o.Kind.GVR
		if usesPodGroup(o) {
			r = podGroups // its field needs them, and the pod's own resource is always served
		}
		ok, err := isServed(r)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		what := o.Kind.APIVersion + " " + o.Kind.Kind
		if r != o.Kind.GVR {
			what = "spec.schedulingGroup of a " + o.Kind.Kind
			if o.Kind.Kind != "Pod" {
				what = "spec.template.spec.schedulingGroup of a " + o.Kind.Kind
			}
		}
		msg := fmt.Sprintf("%s document %d (%s): %s is not served by this cluster", o.File, o.Index, Ref(o), what)
		if hint := needs[r]; hint != "" {
			msg += ": " + hint
		}
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}

// usesPodGroup reports whether a Pod, or the pod template of a Job or Deployment, names a
// PodGroup (spec.schedulingGroup), a field an API server without PodGroups drops.
func usesPodGroup(o Object) bool {
	path := []string{"spec", "schedulingGroup", "podGroupName"}
	if o.Kind.Kind != "Pod" {
		path = append([]string{"spec", "template"}, path...)
	}
	_, found, _ := unstructured.NestedString(o.Obj.Object, path...)
	return found
}
