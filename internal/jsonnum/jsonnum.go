// Package jsonnum decodes JSON the way every part of cursorflow wants its
// numbers: an integer that fits is int64; an integer that does not is a
// float64 where one prints it back digit for digit (1e20), else its exact
// decimal text (a uint64 id such as 18446744073709551615); any other
// number float64 (one float64 cannot hold is kept as its text). So an id
// read back from the log, a column, a message or a request renders as 42,
// not 42.0, and never loses digits, and a float the log recorded comes
// back a number. It is the one place that does this.
package jsonnum

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unsafe"
)

// Number converts n: int64 when it is an integer that fits; float64 when
// it has a fraction or an exponent, or is an integer literal past int64
// that a float64 holds and prints back digit for digit (1e20, which Go's
// and JavaScript's encoders write as 100000000000000000000: a float the
// log recorded must come back a number, or an arc's {{ x > 5 }} turns
// false); else its text (an id such as 18446744073709551615, which a
// float64 would round to another row's id; and numbers out of float64's
// range).
func Number(n json.Number) any {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	if !strings.ContainsAny(s, ".eE") {
		// An integer past int64: Decimal's rule, the one NUMERIC columns
		// follow (a float64 only where it prints back digit for digit).
		return Decimal(s)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f
	}
	return s
}

// Normalize replaces every json.Number inside v — a value decoded with
// UseNumber: maps, lists, scalars — by Number's value, in place where it
// can, and returns the result.
func Normalize(v any) any {
	switch t := v.(type) {
	case json.Number:
		return Number(t)
	case map[string]any:
		for k, e := range t {
			t[k] = Normalize(e)
		}
	case []any:
		for i, e := range t {
			t[i] = Normalize(e)
		}
	}
	return v
}

// Decode parses data, one JSON value with nothing after it, into plain Go
// values (map[string]any, []any, string, bool, nil and numbers as Number
// gives them).
func Decode(data []byte) (any, error) {
	if v, ok := decodePlain(data, nil); ok {
		return v, nil
	}
	return decodeStream(data)
}

// Strings is where Decode's small documents keep their text when many
// are decoded one after another (the JSON column of a claim's rows): the
// strings of a document of at most sharedDoc bytes are cut from one
// copy of it, and with Strings those copies share a chunk of
// stringsChunk bytes, one allocation for the documents of many rows
// rather than one a row. A string kept alone then keeps its chunk alive:
// at most stringsChunk bytes. The zero Strings is ready to use; it is
// not safe for concurrent use.
type Strings struct {
	// chunk is only ever appended to: the bytes a string was cut from
	// are never written again.
	chunk []byte
}

// stringsChunk is the largest Strings chunk: 16 documents of sharedDoc
// bytes, a hundred rows of a short payload.
const stringsChunk = 4096

// Decode is Decode, keeping the text of a small document in s.
func (s *Strings) Decode(data []byte) (any, error) {
	if v, ok := decodePlain(data, s); ok {
		return v, nil
	}
	return decodeStream(data)
}

// copy returns data, at most sharedDoc bytes, as a string in s's chunk.
func (s *Strings) copy(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	if len(data) > cap(s.chunk)-len(s.chunk) {
		// Chunks double from sharedDoc bytes: a claim of one row takes
		// no more than it did without Strings.
		s.chunk = make([]byte, 0, max(min(2*cap(s.chunk), stringsChunk), sharedDoc, len(data)))
	}
	start := len(s.chunk)
	s.chunk = append(s.chunk, data...)
	// The string's bytes are never written again (chunk is only
	// appended to, past them), which is what a string needs of them;
	// strings.Builder makes its string the same way.
	return unsafe.String(&s.chunk[start], len(data))
}

// decodeStream is Decode through encoding/json's Decoder.
func decodeStream(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return Normalize(v), nil
}

// Unmarshal decodes data into v like json.Unmarshal, except that numbers
// landing in a field, map value or element of type any come out as Number
// gives them.
func Unmarshal(data []byte, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		if s := rv.Elem(); s.Kind() == reflect.Struct && s.IsZero() {
			if unmarshalFast(data, s) {
				return nil
			}
			s.SetZero()
		}
	}
	return unmarshalStream(data, v)
}

// UnmarshalStream is Unmarshal through encoding/json's Decoder alone,
// without reading a struct member by member: the same answers, slower.
// Tests compare the two.
func UnmarshalStream(data []byte, v any) error { return unmarshalStream(data, v) }

// unmarshalStream is Unmarshal through encoding/json's Decoder.
func unmarshalStream(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	normalizeValue(reflect.ValueOf(v))
	return nil
}

// normalizeValue walks pointers, exported struct fields, slices and maps,
// normalising the interface values it finds.
func normalizeValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			normalizeValue(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			// An embedded struct's exported fields are settable even when
			// its type is unexported.
			if f := v.Type().Field(i); f.IsExported() || f.Anonymous {
				normalizeValue(v.Field(i))
			}
		}
	case reflect.Slice:
		if plainKind(v.Type().Elem().Kind()) {
			// []byte (a json.RawMessage), []string, []int64...: nothing
			// to normalise, and walking them element by element is what
			// a frame's recorded rows would cost.
			return
		}
		for i := 0; i < v.Len(); i++ {
			normalizeValue(v.Index(i))
		}
	case reflect.Map:
		if v.Type().Elem().Kind() == reflect.Interface {
			for _, k := range v.MapKeys() {
				if x := Normalize(v.MapIndex(k).Interface()); x != nil {
					v.SetMapIndex(k, reflect.ValueOf(x))
				}
			}
			return
		}
		for _, k := range v.MapKeys() {
			if e := v.MapIndex(k); e.Kind() == reflect.Pointer {
				normalizeValue(e)
			}
		}
	case reflect.Interface:
		if !v.IsNil() && v.CanSet() {
			if x := Normalize(v.Interface()); x == nil {
				v.Set(reflect.Zero(v.Type()))
			} else {
				v.Set(reflect.ValueOf(x))
			}
		}
	}
}

// plainKind reports whether values of kind k hold no interface value.
func plainKind(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}
