// Package conv holds the small value conversions the built-in tools share:
// reading rendered config values, formatting scalars the way NoETL's
// Python tools print them, and decoding JSON into plain Go values.
package conv

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/cursorflow/cursorflow/tools"
)

// First returns the value of the first key of keys present in m.
func First(m map[string]any, keys ...string) (any, string, bool) {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v, k, true
		}
	}
	return nil, "", false
}

// String returns the first of keys present in m as a string (scalars are
// formatted with Scalar). A nil value counts as absent.
func String(m map[string]any, keys ...string) (string, bool) {
	for _, k := range keys {
		if v, ok := m[k]; ok && v != nil {
			return Scalar(v), true
		}
	}
	return "", false
}

// Scalar formats v for a URL parameter, header or argv element: strings as
// they are, whole floats without ".0", bools lower-case, nil as "", maps
// and lists as JSON.
func Scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case int8:
		return strconv.FormatInt(int64(v), 10)
	case int16:
		return strconv.FormatInt(int64(v), 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint:
		return strconv.FormatUint(uint64(v), 10)
	case uint8:
		return strconv.FormatUint(uint64(v), 10)
	case uint16:
		return strconv.FormatUint(uint64(v), 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float32:
		return formatFloat(float64(v), 32)
	case float64:
		return formatFloat(v, 64)
	case json.Number:
		return v.String()
	case []byte:
		return string(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case fmt.Stringer:
		return v.String()
	case map[string]any, []any, []string, []map[string]any:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 1 && b[0] == '"' {
		var s string
		if json.Unmarshal(b, &s) == nil {
			return s
		}
	}
	return string(b)
}

func formatFloat(f float64, bits int) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, bits)
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// Seconds reads a duration given in seconds (a number or a numeric
// string). ok is false when v is nil; err reports anything unreadable.
func Seconds(v any) (d time.Duration, ok bool, err error) {
	var f float64
	switch v := v.(type) {
	case nil:
		return 0, false, nil
	case string:
		if v == "" {
			return 0, false, nil
		}
		f, err = strconv.ParseFloat(v, 64)
		if err != nil {
			if d, derr := time.ParseDuration(v); derr == nil {
				return d, true, nil
			}
			return 0, false, fmt.Errorf("%q is not a number of seconds", v)
		}
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case float64:
		f = v
	case json.Number:
		f, err = v.Float64()
		if err != nil {
			return 0, false, fmt.Errorf("%q is not a number of seconds", v)
		}
	default:
		return 0, false, fmt.Errorf("%T is not a number of seconds", v)
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, fmt.Errorf("%v is not a valid number of seconds", v)
	}
	return time.Duration(f * float64(time.Second)), true, nil
}

// Bool reads a boolean given as a bool or a string ("true", "1", ...).
func Bool(v any) (b bool, ok bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		b, err := strconv.ParseBool(v)
		return b, err == nil
	}
	return false, false
}

// Map returns v as map[string]any when it is one.
func Map(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok
}

// Truncate shortens s to at most n bytes on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// Alias returns the keychain alias a config names (tools.AliasOf).
func Alias(cfg map[string]any) (string, bool) { return tools.AliasOf(cfg) }
