package jsonnum

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	got, err := Decode([]byte(`{"id": 9007199254740993, "f": 1.5, "whole": 2.0, "big": 1e400, "list": [1, -2, 3.25], "s": "7", "n": null}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": int64(9007199254740993), "f": 1.5, "whole": 2.0, "big": "1e400",
		"list": []any{int64(1), int64(-2), 3.25}, "s": "7", "n": nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	if _, err := Decode([]byte(`{} {}`)); err == nil {
		t.Fatal("trailing data accepted")
	}
}

// TestBigIntegers: an integer literal past int64 (a uint64 id, a
// 30-digit number) keeps its exact text whichever way it is decoded,
// where a float64 would render 18446744073709551615 as
// 18446744073709552000, unless a float64 prints it back as it is (the
// form Go's encoder gives a float such as 1e20); fractions and exponents
// stay float64.
func TestBigIntegers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want any
	}{
		{"18446744073709551615", "18446744073709551615"},
		{"-9223372036854775809", "-9223372036854775809"},
		{"123456789012345678901234567890", "123456789012345678901234567890"},
		// A float64 holds it and prints it back digit for digit: it is the
		// float Go's encoder writes 1e19 and 1e20 as (the log records
		// floats so), and must come back a number.
		{"10000000000000000000", 1e19},
		{"100000000000000000000", 1e20},
		{"18446744073709552000", 18446744073709552000.0},
		{"9223372036854775807", int64(9223372036854775807)},
		{"-9223372036854775808", int64(-9223372036854775808)},
		{"18446744073709551615.0", 18446744073709551615.0},
		{"1e19", 1e19},
		{"1E400", "1E400"},
	} {
		if got := Number(json.Number(c.in)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Number(%s) = %#v, want %#v", c.in, got, c.want)
		}
		doc := `{"id": ` + c.in + `}`
		// The plain parser, the Decoder (which Decode falls back to on a
		// string that is not UTF-8) and Unmarshal into a struct.
		for _, data := range []string{doc, `{"x": "` + "ÿ" + `", "id": ` + c.in + `}`} {
			got, err := Decode([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			if id := got.(map[string]any)["id"]; !reflect.DeepEqual(id, c.want) {
				t.Errorf("Decode(%q) id = %#v, want %#v", data, id, c.want)
			}
		}
		var v struct{ ID any }
		if err := Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v.ID, c.want) {
			t.Errorf("Unmarshal(%s) id = %#v, want %#v", doc, v.ID, c.want)
		}
	}
}

type embedded struct{ E any }

func TestUnmarshal(t *testing.T) {
	t.Parallel()
	var v struct {
		embedded
		A    any
		M    map[string]any
		L    []any
		P    *struct{ X any }
		Keep int
	}
	if err := Unmarshal([]byte(`{"E": 6, "A": 1, "M": {"k": [2, 2.5]}, "L": [3], "P": {"X": 4}, "Keep": 5}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != int64(1) || !reflect.DeepEqual(v.M["k"], []any{int64(2), 2.5}) || v.L[0] != int64(3) || v.P.X != int64(4) || v.Keep != 5 || v.E != int64(6) {
		t.Fatalf("%#v", v)
	}
}

// BenchmarkUnmarshalRawRows decodes a frame.claimed-like payload of 100
// rows into a struct that keeps them raw.
func BenchmarkUnmarshalRawRows(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"rows":[`)
	for i := 1; i <= 100; i++ {
		if i > 1 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"key":"%d","values":{"id":%d,"payload":"payload-%d"},"attempt":1}`, i, i, i)
	}
	sb.WriteString(`]}`)
	data := []byte(sb.String())
	var v struct {
		Rows json.RawMessage `json:"rows"`
	}
	for b.Loop() {
		if err := Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
	}
}
