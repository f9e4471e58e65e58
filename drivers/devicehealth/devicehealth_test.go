package devicehealth

import (
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
