package pgparam

import (
	"reflect"
	"testing"
)

func TestEncode(t *testing.T) {
	t.Parallel()
	got, err := Encode([]any{nil, "it's", true, int64(-7), 2.5, map[string]any{"a": []any{int64(1)}}, []any{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{nil, []byte("it's"), []byte("true"), []byte("-7"), []byte("2.5"), []byte(`{"a":[1]}`), []byte(`["x"]`)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := Encode([]any{"a\x00b"}); err == nil {
		t.Fatal("a NUL byte was accepted")
	}
}

func TestAppendArray(t *testing.T) {
	t.Parallel()
	got, err := appendArray(nil, []any{nil, `a"b\c`, "", int64(3), true, 1.5, []any{"x", nil}, map[string]any{"k": "v"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{NULL,"a\"b\\c","","3","true","1.5",{"x",NULL},"{\"k\":\"v\"}"}`
	if string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if _, err := appendArray(nil, []any{"a\x00b"}, false); err == nil {
		t.Fatal("a NUL byte was accepted")
	}
}
