package jsonvalid_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/internal/jsonvalid"
)

// seeds are valid and invalid JSON around every rule of the grammar.
var seeds = []string{
	``, ` `, `null`, `true`, `false`, `nul`, `tru`, `falsey`, `nullnull`,
	`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e10`, `2a`, `+1`, `1.5.5`,
	`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, `"a`, `"\`,
	"\"tab\there\"", "\"nl\nhere\"", "\"\x7f\"", "\"\xff\xfe\"", "\"é\"",
	`[]`, `[ ]`, `[1]`, `[1,2]`, `[1,]`, `[,1]`, `[1 2]`, `[`, `]`, `[[]]`, `[[]`, `[]]`,
	`{}`, `{ }`, `{"a":1}`, `{"a":1,"b":[true,null]}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1,}`, `{,}`, `{"a" : 1 , "b" : 2}`,
	`{"a":1}}`, `{"a":{"b":{}}}`, `{"a":[{"b":"c"}]}`, `{1:2}`,
	" \t\n\r{\"k\" :\n[ 1 , 2 ]\r}\t ", `1 2`, `[] []`, "\x00", `{"a":1}x`,
	`{"rows":[{"key":"1","values":{"id":1,"payload":"payload-1"}}],"counts":{"rows":1,"ok":1,"failed":0,"dead":0}}`,
}

// TestAgreesWithEncodingJSON: Valid answers as encoding/json.Valid on
// every seed, at nesting depths around the limit, and on random
// mutations of the seeds (bytes changed, cut, doubled).
func TestAgreesWithEncodingJSON(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		if got, want := jsonvalid.Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	}
	for _, s := range seeds {
		check([]byte(s))
	}
	for _, d := range []int{9999, 10000, 10001} {
		check([]byte(strings.Repeat("[", d) + strings.Repeat("]", d)))
		check([]byte(strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d)))
		check([]byte(strings.Repeat("[", d-1) + "{}" + strings.Repeat("]", d-1)))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(` {}[],:"\\/0123456789.eE+-tfnrulsabu` + "\t\n\x01\xff")
	for range 200000 {
		b := []byte(seeds[rng.IntN(len(seeds))])
		for range 1 + rng.IntN(3) {
			switch op := rng.IntN(4); {
			case op == 0 && len(b) > 0:
				b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
			case op == 1 && len(b) > 0:
				i := rng.IntN(len(b))
				b = append(b[:i:i], b[i+1:]...)
			case op == 2:
				i := rng.IntN(len(b) + 1)
				b = append(b[:i:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			default:
				b = append(b, b...)
			}
		}
		check(b)
	}
}

// FuzzValid holds Valid to encoding/json.Valid on any input.
func FuzzValid(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := jsonvalid.Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// BenchmarkValid compares Valid with encoding/json.Valid on a frame.done
// payload of 100 rows.
func BenchmarkValid(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"items":[`)
	for i := range 100 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"key":"` + strings.Repeat("7", 1+i%6) + `","outcome":"ok","ms":3}`)
	}
	sb.WriteString(`],"counts":{"rows":100,"ok":100,"failed":0,"dead":0},"ms":41,"claim_open_us":2210}`)
	p := []byte(sb.String())
	b.Run("jsonvalid", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if !jsonvalid.Valid(p) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if !json.Valid(p) {
				b.Fatal("invalid")
			}
		}
	})
}
