package httpapi

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// The API's query parameters. A bad one is a 400 bad_request whose message starts with the
// parameter's name ("limit: ..."), so a client knows which one to fix; parameters a route does
// not read are ignored, as HTTP APIs commonly do.

// parseQuery parses a raw query string like url.ParseQuery, but an undecodable pair is an
// error naming its parameter: url.Values from URL.Query() silently drops it, so "?limit=%zz"
// would be read as no limit at all.
func parseQuery(raw string) (url.Values, error) {
	q := url.Values{}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("%s: the parameter name is not valid URL encoding", k)
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("%s: the value %q is not valid URL encoding", key, v)
		}
		q[key] = append(q[key], val)
	}
	return q, nil
}

// single is the value of a parameter given at most once ("" when absent).
func single(q url.Values, name string) (string, error) {
	switch v := q[name]; len(v) {
	case 0:
		return "", nil
	case 1:
		return v[0], nil
	default:
		return "", fmt.Errorf("%s: given %d times, want it once", name, len(v))
	}
}

// intParam is an integer parameter in [lo, hi], def when absent.
func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	s, err := single(q, name)
	if err != nil || s == "" {
		return def, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		if hi == maxInt {
			return 0, fmt.Errorf("%s: want an integer >= %d, got %q", name, lo, s)
		}
		return 0, fmt.Errorf("%s: want an integer from %d to %d, got %q", name, lo, hi, s)
	}
	return n, nil
}

// enumParam is a parameter that is absent or one of values.
func enumParam(q url.Values, name string, values ...string) (string, error) {
	s, err := single(q, name)
	if err != nil || s == "" {
		return "", err
	}
	for _, v := range values {
		if s == v {
			return s, nil
		}
	}
	return "", fmt.Errorf("%s: want one of %s, got %q", name, strings.Join(values, ", "), s)
}

const maxInt = int(^uint(0) >> 1)

// occupancyQuery is /api/occupancy's query: q (free text), state, groupBy (a node label
// key), offset, limit.
type occupancyQuery struct {
	filter, state, groupBy string
	offset, limit          int
}

func parseOccupancyQuery(raw string) (occupancyQuery, error) {
	var o occupancyQuery
	q, err := parseQuery(raw)
	if err == nil {
		o.filter, err = single(q, "q")
	}
	if err == nil {
		o.state, err = enumParam(q, "state", "allocated", "free", "tainted")
	}
	if err == nil {
		o.groupBy, err = single(q, "groupBy")
	}
	if err == nil {
		o.offset, err = intParam(q, "offset", 0, 0, maxInt)
	}
	if err == nil {
		o.limit, err = intParam(q, "limit", defaultOccupancyLimit, 1, maxOccupancyLimit)
	}
	return o, err
}

// explainDevices reads /api/explain's devices parameter: true (the default) or false.
func explainDevices(raw string) (bool, error) {
	q, err := parseQuery(raw)
	if err != nil {
		return false, err
	}
	v, err := enumParam(q, "devices", "true", "false")
	return v != "false", err
}
