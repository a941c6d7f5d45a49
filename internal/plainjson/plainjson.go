// Package plainjson encodes plain values (maps with string keys, lists,
// strings, numbers, booleans, nil) byte for byte as encoding/json does,
// without reflection: a map's keys are sorted directly rather than through
// reflect.Value copies, which is most of what encoding/json allocates for
// such values. Any other type is handed to encoding/json.
package plainjson

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds nesting, as encoding/json's cycle check would.
const maxDepth = 1000

// Append appends the JSON encoding of v to b, as json.Marshal would write
// it (HTML characters escaped, keys sorted). A value encoding/json refuses
// (a non-finite float, a channel) is an error.
func Append(b []byte, v any) ([]byte, error) {
	return appendValue(b, v, 0)
}

// AppendString appends s as a JSON string, as json.Marshal writes it.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				// Other control characters, and <, > and & (HTML).
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Line and paragraph separators, escaped for JavaScript.
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, &json.UnsupportedValueError{Str: "nested too deeply"}
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return AppendString(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case float64:
		return appendFloat(b, x)
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		if x == nil {
			return append(b, "null"...), nil
		}
		// A row's columns take no allocation, and each value is taken
		// with its key rather than looked up again once they are sorted.
		var small [8]Member
		members := small[:0]
		for k, e := range x {
			members = append(members, Member{Key: k, Value: e})
		}
		SortMembers(members)
		b = append(b, '{')
		for i, m := range members {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, m.Key)
			b = append(b, ':')
			var err error
			if b, err = appendValue(b, m.Value, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// SortMembers sorts members by key: a row's few by insertion, with
// no comparison function to call.
func SortMembers(members []Member) {
	if len(members) > 8 {
		slices.SortFunc(members, func(a, b Member) int { return strings.Compare(a.Key, b.Key) })
		return
	}
	for i := 1; i < len(members); i++ {
		for j := i; j > 0 && members[j].Key < members[j-1].Key; j-- {
			members[j], members[j-1] = members[j-1], members[j]
		}
	}
}

// Member is a map's key and value, as an encoder sorts them (SortMembers)
// to write the map's members in key order.
type Member struct {
	Key   string
	Value any
}

// appendFloat writes f as encoding/json does: the shortest decimal that
// reads back as f, in exponent form below 1e-6 and from 1e21 on, with
// the exponent's leading zero dropped.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07 is written e-7.
		n := len(b)
		if n-start >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}
