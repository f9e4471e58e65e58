package httpapi

import "testing"

// TestQueryRejectionsNameTheParameter: a bad query parameter is refused with a message that
// starts with its name; a bad escape is refused rather than dropped.
func TestQueryRejectionsNameTheParameter(t *testing.T) {
	for raw, want := range map[string]string{
		"limit=0":           `limit: want an integer from 1 to 1000, got "0"`,
		"limit=%zz":         `limit: the value "%zz" is not valid URL encoding`,
		"offset=-1":         `offset: want an integer >= 0, got "-1"`,
		"state=busy&q=x":    `state: want one of allocated, free, tainted, got "busy"`,
		"q=a&q=b":           `q: given 2 times, want it once`,
		"%zz=1":             `%zz: the parameter name is not valid URL encoding`,
		"limit=5&unknown=1": ``,
	} {
		_, err := parseOccupancyQuery(raw)
		if got := errString(err); got != want {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
	}
	for raw, want := range map[string]string{
		"devices=false": "", "devices=true": "", "": "", "devices=no": `devices: want one of true, false, got "no"`,
	} {
		if _, err := explainDevices(raw); errString(err) != want {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
	if d, _ := explainDevices("devices=false"); d {
		t.Error("devices=false must leave the devices out")
	}
	if o, _ := parseOccupancyQuery("q=rack%3Dr1&offset=7"); o.filter != "rack=r1" || o.offset != 7 || o.limit != defaultOccupancyLimit {
		t.Errorf("parsed %+v", o)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
