package jsonnum

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// TestDecodePlainAgrees compares decodePlain with the Decoder on valid
// JSON of every shape and on malformed input: where decodePlain answers,
// it gives the Decoder's value; it never accepts what the Decoder
// refuses.
func TestDecodePlainAgrees(t *testing.T) {
	t.Parallel()
	inputs := []string{
		`0`, `-0`, `1`, `-1`, `9007199254740993`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775809`,
		`1.5`, `2.0`, `1e400`, `-1e-400`, `1E+2`, `0.1e-2`, `"s"`, `""`, `"esc\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"`,
		`"\ud800"`, `"ünï ✓"`, "\"bad\xff\"", "\"ctl\x01\"", `true`, `false`, `null`, `[]`, `{}`, ` [ 1 , "a" , null ] `,
		`{"a":1,"a":2}`, `{"k":{"n":[1,{"x":true}]}}`, "\t{\n\"a\"\r:\n1}\n",
		// Malformed, or where the Decoder has its own ideas.
		``, ` `, `-`, `01`, `-01`, `1.`, `.5`, `1e`, `1e+`, `+1`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `[1 2]`,
		`tru`, `nul`, `"open`, `[`, `{`, `1 2`, `1 ]`, `{} x`, `"a\x"`, `"\u12"`, `NaN`, `[1]]`, "\"\\u0000\"",
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		b, err := json.Marshal(randomJSON(r, 0))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
	}
	inputs = append(inputs, strings.Repeat("[", 600)+strings.Repeat("]", 600))
	plain := 0
	for _, in := range inputs {
		want, wantErr := decodeStream([]byte(in))
		got, ok := decodePlain([]byte(in), nil)
		if !ok {
			continue
		}
		plain++
		if wantErr != nil {
			t.Errorf("%q: decodePlain accepts it (%#v), the Decoder says %v", in, got, wantErr)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: decodePlain %#v, the Decoder %#v", in, got, want)
		}
	}
	if plain < len(inputs)/2 {
		t.Errorf("decodePlain answered only %d of %d inputs", plain, len(inputs))
	}
}

var jsonStrings = []string{"", "a", `q"<&>\`, "ünï ✓ 😀", "\n\t\u2028", "\x00\x1f", "bad\xffx"}

func randomJSON(r *rand.Rand, depth int) any {
	switch n := r.IntN(9); {
	case n == 0 || depth > 3:
		return jsonStrings[r.IntN(len(jsonStrings))]
	case n == 1:
		return []any{int64(r.Int()), -r.Float64() * 1e30, r.Float64(), 1e-9, float64(r.IntN(100))}[r.IntN(5)]
	case n == 2:
		return nil
	case n == 3:
		return r.IntN(2) == 0
	case n <= 5:
		m := map[string]any{}
		for range r.IntN(4) {
			m[jsonStrings[r.IntN(len(jsonStrings))]] = randomJSON(r, depth+1)
		}
		return m
	default:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randomJSON(r, depth+1)
		}
		return l
	}
}

// TestMembersAgrees: on valid JSON objects Members yields exactly the
// members encoding/json reads, in order, each value the same JSON; it
// refuses (rather than misreads) non-objects and keys with escapes.
func TestMembersAgrees(t *testing.T) {
	t.Parallel()
	inputs := []string{`{}`, ` { } `, `{"a":1}`, ` {"a" : [1, {"b":"}]"}], "c":"\"\\", "d": {"e":[]} , "f":null} `,
		`{"rows":[{"key":"1","values":{"id":1,"s":"x]}"}}],"n":-1.5e3,"t":true}`}
	r := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		m := map[string]any{}
		for range r.IntN(5) {
			m[[]string{"a", "rows", "items", "counts", "k k"}[r.IntN(5)]] = randomJSON(r, 0)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
	}
	for _, in := range inputs {
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		got := map[string]json.RawMessage{}
		if err := Members([]byte(in), func(k string, v []byte) error {
			if _, dup := got[k]; dup {
				t.Errorf("%q: key %q twice", in, k)
			}
			got[k] = v
			return nil
		}); err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%q: %d members, want %d", in, len(got), len(want))
		}
		for k, w := range want {
			var a, b any
			if json.Unmarshal(got[k], &a) != nil || json.Unmarshal(w, &b) != nil || !reflect.DeepEqual(a, b) {
				t.Errorf("%q: member %q = %s, want %s", in, k, got[k], w)
			}
		}
	}
	for _, in := range []string{``, `[]`, `1`, `"s"`, `{"a\u0062":1}`, `{"a":1`, `{"a":}`, `{"a":1} x`, `{"a" 1}`, `{"a":"open}`} {
		if err := Members([]byte(in), func(string, []byte) error { return nil }); err == nil {
			t.Errorf("%q: accepted", in)
		}
	}
}

// A row's jsonb costs the map (its header and its slots), one copy of
// the document its strings are cut from, and the boxes of its string
// values and of a number the runtime has none cached for. Before, every
// key, every string and every number's text was a string of its own.
func TestDecodeAllocations(t *testing.T) {
	doc := []byte(`{"n": 1000, "name": "job 1000", "tag": "x"}`)
	want := map[string]any{"n": int64(1000), "name": "job 1000", "tag": "x"}
	if v, err := Decode(doc); err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("Decode = %v, %v; want %v", v, err, want)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Decode(doc) }); n > 6 {
		t.Errorf("Decode(%s) makes %v allocations, want at most 6", doc, n)
	}
}

// A large document's strings are copies of their own: a string kept from
// it does not keep the whole document alive.
func TestLargeDocumentStringsStandAlone(t *testing.T) {
	pad := strings.Repeat("p", sharedDoc)
	doc := `{"a":"first","b":"second","pad":"` + pad + `"}`
	v, ok := decodePlain([]byte(doc), nil)
	if !ok {
		t.Fatal("decodePlain refused")
	}
	m := v.(map[string]any)
	a, b := m["a"].(string), m["b"].(string)
	gap := strings.Index(doc, `"second"`) - strings.Index(doc, `"first"`)
	if uintptr(unsafe.Pointer(unsafe.StringData(b)))-uintptr(unsafe.Pointer(unsafe.StringData(a))) == uintptr(gap) {
		t.Errorf("the strings of a %d-byte document are cut from one copy of it", len(doc))
	}
	small := `{"a":"first","b":"second"}`
	v, _ = decodePlain([]byte(small), nil)
	m = v.(map[string]any)
	a, b = m["a"].(string), m["b"].(string)
	gap = strings.Index(small, `"second"`) - strings.Index(small, `"first"`)
	if uintptr(unsafe.Pointer(unsafe.StringData(b)))-uintptr(unsafe.Pointer(unsafe.StringData(a))) != uintptr(gap) {
		t.Errorf("the strings of a %d-byte document are not cut from one copy of it", len(small))
	}
}

// The strings Decode returns (keys, values, a number's text) own their
// bytes: a caller's buffer reused after the call (pgx's read buffer, which
// the next row overwrites) does not change them.
func TestDecodeOwnsItsStrings(t *testing.T) {
	for _, doc := range []string{
		`{"name": "job 1000", "tag": "xy", "big": 123456789012345678901234567890, "f": 1.5e300}`,
		`["` + strings.Repeat("p", sharedDoc) + `", "second"]`,
	} {
		buf := []byte(doc)
		v, err := Decode(buf)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Decode([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = 'z'
		}
		if !reflect.DeepEqual(v, want) {
			t.Errorf("%s: overwriting the input changed the decoded value to %v", doc, v)
		}
	}
}

// Strings.Decode gives what Decode gives, and its strings own their bytes
// as Decode's do, over a run of documents read from one reused buffer
// (pgx's, which the next row overwrites); the small documents' text costs
// one allocation a chunk, not one a document.
func TestStringsDecode(t *testing.T) {
	var docs []string
	for i := range 300 {
		docs = append(docs, fmt.Sprintf(`{"n": %d, "name": "job %d", "tag": "t"}`, i*1000, i))
	}
	docs = append(docs, `["`+strings.Repeat("p", sharedDoc)+`", "second"]`, `"just a string"`, `{"e":"esc\"aped"}`, `[1, "x"]`, `nul`)
	var s Strings
	var got []any
	buf := make([]byte, 0, 1024)
	for _, doc := range docs {
		buf = append(buf[:0], doc...)
		v, err := s.Decode(buf)
		want, wantErr := Decode([]byte(doc))
		if (err != nil) != (wantErr != nil) || !reflect.DeepEqual(v, want) {
			t.Fatalf("%s: Strings.Decode = %#v, %v; Decode %#v, %v", doc, v, err, want, wantErr)
		}
		got = append(got, v)
		for i := range buf {
			buf[i] = 'z'
		}
	}
	for i, doc := range docs {
		want, _ := Decode([]byte(doc))
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("%s: a later document changed the decoded value to %#v", doc, got[i])
		}
	}
	doc := []byte(docs[1])
	plain := testing.AllocsPerRun(100, func() { _, _ = Decode(doc) })
	shared := testing.AllocsPerRun(100, func() { _, _ = s.Decode(doc) })
	if shared > plain-0.9 {
		t.Errorf("Strings.Decode(%s) makes %v allocations, Decode %v: the document's copy is not shared", doc, shared, plain)
	}
}

// BenchmarkDecodeRows decodes the jsonb payloads of a frame of 100 rows,
// as the postgres driver does a claim's: with Decode, and with one Strings.
func BenchmarkDecodeRows(b *testing.B) {
	docs := make([][]byte, 100)
	for i := range docs {
		docs[i] = fmt.Appendf(nil, `{"n": %d, "name": "job %d"}`, 1000+i, 1000+i)
	}
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, d := range docs {
				if _, err := Decode(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("Strings", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s Strings
			for _, d := range docs {
				if _, err := s.Decode(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
