package sqlcursor

import (
	"database/sql/driver"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
)

// Normalize converts a database value into a JSON-friendly Go value:
// integers become int64 (unsigned ones beyond int64, and big.Int values
// beyond it, their exact decimal text: a float64 would change the value,
// and with it a key such as MySQL's BIGINT UNSIGNED 18446744073709551615),
// floats float64, time.Time an RFC 3339 string in UTC (nanoseconds kept),
// []byte and string a string when valid UTF-8 and base64 (standard
// encoding) otherwise, json.RawMessage its decoded value, maps and slices are
// converted element by element (maps to map[string]any, slices to []any),
// driver.Valuer and fmt.Stringer values their value or string, and
// anything else its fmt.Sprint form. nil stays nil.
func Normalize(v any) any {
	// A value kept as it is returns orig, not the case's typed v: boxing a
	// string again would cost an allocation per text column of every row.
	orig := v
	switch v := v.(type) {
	case nil:
		return nil
	case bool, int64, float64:
		return v
	case string:
		// A TEXT value holding bytes that are not UTF-8 (SQLite stores
		// what it is given) is binary data, as []byte is below: the log
		// records rows as JSON, which would put U+FFFD in their place.
		if !utf8.ValidString(v) {
			return base64.StdEncoding.EncodeToString([]byte(v))
		}
		return orig
	case int:
		return int64(v)
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint:
		return normalizeUint(uint64(v))
	case uint64:
		return normalizeUint(v)
	case float32:
		return float64(v)
	case *big.Int:
		if v == nil {
			return nil
		}
		if v.IsInt64() {
			return v.Int64()
		}
		return v.String()
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case json.RawMessage:
		// jsonnum, not json.Unmarshal: an id in a JSON column must not
		// come back as a float64 that lost its digits.
		out, err := jsonnum.Decode(v)
		if err != nil {
			return string(v)
		}
		return Normalize(out)
	case []byte:
		if utf8.Valid(v) {
			return string(v)
		}
		return base64.StdEncoding.EncodeToString(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = Normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = Normalize(e)
		}
		return out
	case driver.Valuer:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return nil
		}
		dv, err := v.Value()
		if err != nil {
			return fmt.Sprint(v)
		}
		if _, again := dv.(driver.Valuer); again {
			return fmt.Sprint(dv)
		}
		return Normalize(dv)
	case fmt.Stringer:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return nil
		}
		return v.String()
	}
	return normalizeReflect(reflect.ValueOf(v))
}

func normalizeUint(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return strconv.FormatUint(u, 10)
}

// normalizeReflect handles typed slices, arrays and maps (e.g. []int32,
// map[string]string) and pointers.
func normalizeReflect(rv reflect.Value) any {
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil
		}
		return Normalize(rv.Elem().Interface())
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = Normalize(rv.Index(i).Interface())
		}
		return out
	case reflect.Map:
		if rv.IsNil() {
			return nil
		}
		out := make(map[string]any, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			out[fmt.Sprint(iter.Key().Interface())] = Normalize(iter.Value().Interface())
		}
		return out
	case reflect.String:
		return rv.String()
	case reflect.Bool:
		return rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return normalizeUint(rv.Uint())
	case reflect.Float32, reflect.Float64:
		return rv.Float()
	}
	return fmt.Sprint(rv.Interface())
}

// KeyString formats one normalized key value: integers in decimal, floats
// in the shortest form that round-trips, strings as they are, nil as "",
// anything else as compact JSON.
func KeyString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// attemptValue reads an attempt counter: integers, integral floats and
// numeric strings are accepted.
func attemptValue(v any) (int, error) {
	switch v := v.(type) {
	case int64:
		return int(v), nil
	case float64:
		if v != math.Trunc(v) {
			return 0, fmt.Errorf("attempt counter %v is not an integer", v)
		}
		return int(v), nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("attempt counter %q is not an integer", v)
		}
		return n, nil
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("attempt counter has type %T", v)
}
