package scenario

import (
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

func fakeDiscovery(lists ...*metav1.APIResourceList) *discoveryfake.FakeDiscovery {
	return &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: lists}}
}

func served(gv string, resources ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: gv}
	for _, r := range resources {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r})
	}
	return l
}

// TestUnservedNamesWhatTheClusterLacks: the gang scenario on a cluster without PodGroups is
// refused before anything is applied, naming each PodGroup document, each pod whose
// schedulingGroup the API server would drop, and the profile that serves them; on a cluster
// that serves them it passes.
func TestUnservedNamesWhatTheClusterLacks(t *testing.T) {
	src, err := os.ReadFile("../../examples/scenarios/gang.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode("gang.yaml", src, "default")
	if err != nil {
		t.Fatal(err)
	}
	base := []*metav1.APIResourceList{
		served("v1", "namespaces", "pods", "nodes"),
		served("resource.k8s.io/v1", "deviceclasses", "resourceclaims", "resourceclaimtemplates", "devicetaintrules"),
		served("draforge.oaslananka/v1alpha1", "simulateddevicepools"),
	}
	err = Unserved(fakeDiscovery(base...), objs)
	if err == nil {
		t.Fatal("a cluster without PodGroups accepted the gang scenario")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 10 { // 3 PodGroups, 7 pods
		t.Errorf("%d problems, want 10:\n%s", len(lines), err)
	}
	for _, want := range []string{
		"gang.yaml document 8 (PodGroup draforge-gang/shared): scheduling.k8s.io/v1beta1 PodGroup is not served by this cluster: PodGroups need kube-apiserver's --runtime-config scheduling.k8s.io/v1beta1=true",
		"gang.yaml document 9 (Pod draforge-gang/shared-0): spec.schedulingGroup of a Pod is not served by this cluster: ",
		"the local control plane's dra-all profile (go tool task demo:up PROFILE=dra-all)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%s", want, err)
		}
	}
	if err := Unserved(fakeDiscovery(append(base, served("scheduling.k8s.io/v1beta1", "podgroups", "workloads"))...), objs); err != nil {
		t.Errorf("a cluster serving PodGroups: %v", err)
	}
	job, err := Decode("job.yaml", []byte(`apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ns}
spec:
  template:
    spec:
      restartPolicy: Never
      schedulingGroup: {podGroupName: g}
      containers: [{name: c, image: i}]
`), "default")
	if err != nil {
		t.Fatal(err)
	}
	if err := Unserved(fakeDiscovery(append(base, served("batch/v1", "jobs"))...), job); err == nil ||
		!strings.Contains(err.Error(), "job.yaml document 0 (Job ns/j): spec.template.spec.schedulingGroup of a Job is not served by this cluster") {
		t.Errorf("a Job whose pods name a PodGroup: %v", err)
	}
	if err := Unserved(fakeDiscovery(base[:2]...), objs[:3]); err == nil || !strings.Contains(err.Error(), "install DRAForge's CRDs") {
		t.Errorf("without the CRDs: %v", err)
	}
}
