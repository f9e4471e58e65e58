package e2eutil

import "testing"

func TestExistingClusterIgnoresAmbientKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"nothing set", map[string]string{}, ""},
		{"ambient KUBECONFIG only", map[string]string{"KUBECONFIG": "/home/me/.kube/prod"}, ""},
		{"explicit opt-in", map[string]string{ExistingClusterEnv: "/tmp/kc"}, "/tmp/kc"},
		{"both: the opt-in wins", map[string]string{"KUBECONFIG": "/home/me/.kube/prod", ExistingClusterEnv: "/tmp/kc"}, "/tmp/kc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExistingCluster(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Fatalf("ExistingCluster = %q, want %q", got, tc.want)
			}
		})
	}
}
