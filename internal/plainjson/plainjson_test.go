package plainjson_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/internal/plainjson"
)

// strs are strings with every kind of character encoding/json escapes.
var strs = []string{
	"", "plain", `q"uote`, `back\slash`, "<a href='x'>&amp;</a>", "ctl\x00\x01\x1f\x7f",
	"\b\f\n\r\t", "ünïcödé ✓ 😀", "bad\xffutf8\xc3", "sep\u2028\u2029end", "\u2027\u202a",
}

var nums = []any{
	int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64), 7, -7,
	0.0, math.Copysign(0, -1), 1.0, 0.1, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 1e20, 1e21, 1.2345e22, -3.25,
	math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789012345678.0, 0.1 + 0.2,
}

func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(10); {
	case n == 0 || depth > 3:
		return strs[r.IntN(len(strs))]
	case n == 1:
		return nums[r.IntN(len(nums))]
	case n == 2:
		return nil
	case n == 3:
		return r.IntN(2) == 0
	case n <= 6:
		m := map[string]any{}
		for range r.IntN(5) {
			m[strs[r.IntN(len(strs))]+strs[r.IntN(len(strs))]] = randomValue(r, depth+1)
		}
		return m
	default:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randomValue(r, depth+1)
		}
		return l
	}
}

// TestAgreesWithEncodingJSON compares Append with json.Marshal on random
// plain values built from awkward strings and numbers.
func TestAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	values := []any{map[string]any(nil), []any(nil), json.Number("12.50"), time.Unix(0, 0).UTC(), map[string]string{"b": "<", "a": "x"}}
	for _, s := range strs {
		values = append(values, s)
	}
	values = append(values, nums...)
	for range 5000 {
		values = append(values, randomValue(r, 0))
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := plainjson.Append([]byte("prefix"), v)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		if string(got) != "prefix"+string(want) {
			t.Fatalf("%#v:\n got  %s\n want %s", v, strings.TrimPrefix(string(got), "prefix"), want)
		}
	}
}

func TestRefusesWhatEncodingJSONRefuses(t *testing.T) {
	t.Parallel()
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"x": []any{math.Inf(-1)}}, make(chan int)} {
		if _, err := json.Marshal(v); err == nil {
			t.Fatalf("json.Marshal(%v) succeeds", v)
		}
		if b, err := plainjson.Append(nil, v); err == nil {
			t.Errorf("Append(%v) = %s, want an error", v, b)
		}
	}
}

// BenchmarkAppendRows encodes a frame's 100 claimed rows' values, as the
// engine's frame.claimed payload does.
func BenchmarkAppendRows(b *testing.B) {
	rows := make([]any, 100)
	for i := range rows {
		rows[i] = map[string]any{"id": int64(1000 + i), "payload": map[string]any{"n": int64(1000 + i), "name": "job " + strings.Repeat("x", i%7)}}
	}
	buf := make([]byte, 0, 8192)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = plainjson.Append(buf[:0], rows); err != nil {
			b.Fatal(err)
		}
	}
}
