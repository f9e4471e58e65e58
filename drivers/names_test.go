package drivers

import "testing"

func TestNamesOffline(t *testing.T) {
	n, err := Names()
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Actions) == 0 {
		t.Fatalf("no actions: %+v", n)
	}
	t.Logf("%+v", n)
}
