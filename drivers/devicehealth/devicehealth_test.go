package devicehealth

import (
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
)

func TestMeaning(t *testing.T) {
	for _, tc := range []struct {
		taint resourcev1.DeviceTaint
		want  string
	}{
		{resourcev1.DeviceTaint{Key: TaintNvidiaXID, Value: "79", Effect: resourcev1.DeviceTaintEffectNoSchedule}, "XID 79 (GPU has fallen off the bus), a critical error"},
		{resourcev1.DeviceTaint{Key: TaintNvidiaXID, Value: "13", Effect: resourcev1.DeviceTaintEffectNone}, "XID 13 (Graphics Engine Exception), an application error"},
		{resourcev1.DeviceTaint{Key: TaintNvidiaXID, Value: "150"}, "XID 150, a critical error"},
		{resourcev1.DeviceTaint{Key: TaintNvidiaGPULost}, "ERROR_GPU_IS_LOST"},
		{resourcev1.DeviceTaint{Key: "example.com/other"}, ""},
	} {
		if got := Meaning(tc.taint); !strings.Contains(got, tc.want) || (tc.want == "" && got != "") {
			t.Errorf("Meaning(%v) = %q, want it to contain %q", tc.taint, got, tc.want)
		}
	}
}

// The Intel driver's taint: its categories read back from the key, each described; other keys
// are not Intel's; the driver reports such devices Unhealthy (KEP-4680).
func TestIntelHealthTaint(t *testing.T) {
	tn := resourcev1.DeviceTaint{Key: "HealthIssues-DeviceAbsent_temperature.core.gpu", Effect: resourcev1.DeviceTaintEffectNoExecute}
	cats, ok := IntelCategories(tn.Key)
	if !ok || !slices.Equal(cats, []string{IntelDeviceAbsent, IntelCoreTemperature}) {
		t.Errorf("IntelCategories = %v, %v", cats, ok)
	}
	want := "Intel GPU driver health: unhealthy DeviceAbsent (the GPU is no longer discoverable on the PCI bus), temperature.core.gpu (GPU core temperature critical); effect NoExecute evicts the pods using the GPU"
	if got := Meaning(tn); got != want {
		t.Errorf("Meaning = %q\nwant      %q", got, want)
	}
	if !ReportsUnhealthy(tn) {
		t.Error("an Intel health taint is reported Unhealthy")
	}
	for _, key := range []string{"HealthIssues-", "gpu.intel.com/HealthIssues-memory", TaintNvidiaXID, "UnboundUnmanaged"} {
		if _, ok := IntelCategories(key); ok || ReportsUnhealthy(resourcev1.DeviceTaint{Key: key}) {
			t.Errorf("%s read as an Intel health taint", key)
		}
	}
}
