package jsonnum

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// inner is a struct field's and a slice's element type.
type inner struct {
	Step string         `json:"step"`
	Args map[string]any `json:"args,omitempty"`
	N    int            `json:"n"`
}

// selfDecoding decodes itself: a field of its type goes through
// Unmarshal.
type selfDecoding struct{ got string }

func (s *selfDecoding) UnmarshalJSON(b []byte) error {
	if string(b) == `"fail"` {
		return errors.New("refused")
	}
	s.got = "decoded " + string(b)
	return nil
}

// named is a named string type: read through Unmarshal.
type named string

// every holds a field of every kind the fast path reads, and of some it
// leaves to Unmarshal.
type every struct {
	S        string           `json:"s"`
	B        bool             `json:"b"`
	I        int              `json:"i"`
	I8       int8             `json:"i8"`
	I64      int64            `json:"i64"`
	F        float64          `json:"f"`
	F32      float32          `json:"f32"`
	Any      any              `json:"any"`
	Map      map[string]any   `json:"map"`
	Strs     []string         `json:"strs"`
	List     []any            `json:"list"`
	Maps     []map[string]any `json:"maps"`
	In       inner            `json:"in"`
	Ins      []inner          `json:"ins"`
	Ptr      *inner           `json:"ptr"`
	PtrInt   *int             `json:"ptr_int"`
	Raw      json.RawMessage  `json:"raw"`
	Num      json.Number      `json:"num"`
	Named    named            `json:"named"`
	Self     selfDecoding     `json:"self"`
	Bytes    []byte           `json:"bytes"`
	Untagged string
	Dash     string `json:"-"`
	// hidden is unexported: no member reaches it.
	hidden string
}

// withEmbedded, stringOpt and dupNames are left to the Decoder whole.
type withEmbedded struct {
	inner
	X string `json:"x"`
}

type stringOpt struct {
	N int `json:"n,string"`
}

type dupNames struct {
	A string `json:"a"`
	B string `json:"A"`
	C string // "C", the same as c's name to the Decoder's folding
	D string `json:"c"`
}

// Unmarshal decodes every input as the Decoder does: the same value, or
// the same error. Inputs the fast path reads must also have been read by
// it, so the comparison is not the Decoder's against itself.
func TestUnmarshalStructMatchesTheDecoder(t *testing.T) {
	fast := []string{
		`{}`,
		`{"s":"x","b":true,"i":-3,"i8":127,"i64":9007199254740993,"f":1.5,"f32":2.25,"any":{"a":[1,2.5,"x",null,true,{"b":18446744073709551615}]},"map":{"k":1e20}}`,
		`{"strs":["a","b"],"list":[1,"x"],"maps":[{"a":1},null,{}],"in":{"step":"s","args":{"x":1},"n":2},"ins":[{"step":"a"},{"step":"b","args":null},null]}`,
		`{"ptr":{"step":"p"},"ptr_int":5,"raw":{"x": [1, 2]},"num":12,"named":"n","self":"me","bytes":"aGk=","Untagged":"u","-":"dash","Dash":"x"}`,
		`{"S":"upper key","I64":1,"MAP":{"a":1},"untagged":"lower"}`,
		`{"s":null,"b":null,"i":null,"f":null,"any":null,"map":null,"strs":null,"in":null,"ins":null,"ptr":null,"ptr_int":null,"raw":null,"self":null}`,
		`{"s":"esc \" \\ \/ \b \f \n \r \t end","unknown":{"deep":[1,2,3]},"hidden":"no"}`,
		`{"s":"\u00e9t\u00e9 \ud83d\ude00","strs":["\u2028"]}`,
		` { "s" : "spaced" , "i" : 1 } `,
		`{"map":{},"strs":[],"ins":[],"list":[]}`,
		`{"s":"émigré","any":"日本"}`,
	}
	slow := []string{
		`{"s":1}`, `{"b":"true"}`, `{"i":1.5}`, `{"i":1e2}`, `{"i8":128}`, `{"i":"1"}`,
		`{"f":"1"}`, `{"f32":1e39}`, `{"f":1e400}`, `{"map":[1]}`, `{"strs":"a"}`, `{"strs":[1]}`,
		`{"in":[]}`, `{"ins":{}}`, `{"ptr":1}`, `{"self":"fail"}`, `{"num":"x"}`, `{"bytes":"!!"}`,
		`{"s":"a","s":"b"}`, `{"map":{"a":1},"map":{"b":2}}`, `{"s":"a","S":"b"}`,
		`{"\u0073":"escaped key"}`, `{"ſ":"long s folds into S"}`, `{"ı":"dotless i"}`,
		`{"s":"bad utf8 ` + "\xff" + `"}`, `{"s":"a"`, `{"s":"a"} x`, `[1]`, `null`, `"x"`, ``, `{"s":}`,
		`{"i":01}`, `{"s":"ctl ` + "\x01" + `"}`, `{"a":"1","A":"2","c":"3","C":"4","b":"5"}`, `{"B":"x","d":"y"}`,
	}
	types := []func() any{
		func() any { return new(every) },
		func() any { return new(inner) },
		func() any { return new(withEmbedded) },
		func() any { return new(stringOpt) },
		func() any { return new(dupNames) },
	}
	check := func(in string, wantFast bool) {
		t.Helper()
		for _, mk := range types {
			got, want := mk(), mk()
			gotErr := Unmarshal([]byte(in), got)
			wantErr := unmarshalStream([]byte(in), want)
			if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Errorf("%T %s: error %v, the Decoder's %v", got, in, gotErr, wantErr)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%T %s:\n got %#v\nwant %#v", got, in, got, want)
			}
		}
		if wantFast {
			if !unmarshalFast([]byte(in), reflect.ValueOf(new(every)).Elem()) {
				t.Errorf("%s: not read by the fast path", in)
			}
		}
	}
	for _, in := range fast {
		check(in, true)
	}
	for _, in := range slow {
		check(in, false)
		if unmarshalFast([]byte(in), reflect.ValueOf(new(every)).Elem()) && strings.Contains(in, `"s":"a","s"`) {
			t.Errorf("%s: a repeated key read by the fast path", in)
		}
	}
	var e every
	if err := Unmarshal([]byte(`{"hidden":"no","S":"yes"}`), &e); err != nil || e.hidden != "" || e.S != "yes" {
		t.Errorf("an unexported field was filled, or an exported one not: %#v, %v", e, err)
	}
	// A struct that is not zero keeps what the JSON does not name: the
	// Decoder's business.
	pre := every{S: "kept", Map: map[string]any{"old": int64(1)}}
	want := pre
	want.Map = map[string]any{"old": int64(1)}
	if err := Unmarshal([]byte(`{"i":1,"map":{"new":2}}`), &pre); err != nil {
		t.Fatal(err)
	}
	if err := unmarshalStream([]byte(`{"i":1,"map":{"new":2}}`), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pre, want) {
		t.Errorf("into a filled struct: got %#v, want %#v", pre, want)
	}
}

// A type that holds itself gets a plan, and decodes as the Decoder does.
func TestUnmarshalSelfReferringStruct(t *testing.T) {
	type node struct {
		Name     string  `json:"name"`
		Children []*node `json:"children"`
		Next     *node   `json:"next"`
	}
	in := []byte(`{"name":"a","children":[{"name":"b","children":[]},null],"next":{"name":"c"}}`)
	var got, want node
	if err := Unmarshal(in, &got); err != nil {
		t.Fatal(err)
	}
	if err := unmarshalStream(in, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}

func FuzzUnmarshalStruct(f *testing.F) {
	for _, s := range []string{
		`{"s":"x","i":1,"any":{"a":[1,2.5]},"ins":[{"step":"a","args":{"b":null}}],"ptr":{"n":3}}`,
		`{"S":"x","strs":["a"],"maps":[{}],"self":"x","raw":[1]}`,
		`{"s":"\n\u00e9","f":-0.0,"i64":-9223372036854775808}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var got, want every
		gotErr := Unmarshal(in, &got)
		wantErr := unmarshalStream(in, &want)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("%q: error %v, the Decoder's %v", in, gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", in, got, want)
		}
	})
}
