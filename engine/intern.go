package engine

import (
	"strings"
	"unique"
)

// internMaxLen bounds the string values that are interned: long values (CEL expressions,
// messages) are rarely shared and not worth a canonical entry.
const internMaxLen = 128

// internObject replaces every map key of a decoded object, and the string values that repeat
// across objects, with canonical copies (unique.Make). A JSON decoder allocates each key and
// each string anew per object, so thousands of cached claims would each hold their own
// "apiVersion", namespace, class, driver, pool and node names. Values that identify one object
// (its name, uid, resourceVersion) and timestamps are left alone: interning a string seen once
// costs more than it saves. Maps are changed in place: assigning an existing string key
// stores the new key's bytes.
func internObject(obj map[string]any) {
	internMap(obj, true)
}

func internMap(m map[string]any, top bool) {
	for k, v := range m {
		switch x := v.(type) {
		case string:
			if !isTime(k) {
				v = intern(x)
			}
		case map[string]any:
			if top && k == "metadata" {
				internMeta(x)
			} else {
				internMap(x, false)
			}
		case []any:
			internSlice(x)
		}
		m[intern(k)] = v
	}
}

// internMeta interns metadata's keys and its shared values (namespace, generateName, labels,
// annotations, owner references), not the object's own identity.
func internMeta(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case string:
			switch k {
			case "name", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "selfLink":
			default:
				v = intern(x)
			}
		case map[string]any:
			internMap(x, false)
		case []any:
			internSlice(x)
		}
		m[intern(k)] = v
	}
}

func internSlice(s []any) {
	for i, v := range s {
		switch x := v.(type) {
		case string:
			s[i] = intern(x)
		case map[string]any:
			internMap(x, false)
		case []any:
			internSlice(x)
		}
	}
}

// isTime reports whether key holds a timestamp, which is rarely shared.
func isTime(key string) bool {
	return strings.HasSuffix(key, "Timestamp") || strings.HasSuffix(key, "Time")
}

func intern(s string) string {
	if len(s) == 0 || len(s) > internMaxLen {
		return s
	}
	return unique.Make(s).Value()
}
