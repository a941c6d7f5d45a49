package s3prefix

import (
	"reflect"
	"testing"
)

// TestBodyJSONNumbers: a JSON body's whole numbers are int64, as the other
// drivers give them ({{ iter.job.body.n }} renders 1, not 1.0).
func TestBodyJSONNumbers(t *testing.T) {
	v := map[string]any{}
	setBody(v, []byte(`{"n": 1, "f": 1.5, "big": 9007199254740993}`), true)
	body, _ := v["body"].(map[string]any)
	if body["n"] != int64(1) || body["f"] != 1.5 || body["big"] != int64(9007199254740993) {
		t.Fatalf("body %#v", v["body"])
	}
}

// TestBodyNotUTF8: a body that is not valid UTF-8 is base64 with
// body_base64 set, with or without body_json (a JSON object holding an
// invalid byte is not decoded with U+FFFD in its place); valid UTF-8 is
// kept as it is.
func TestBodyNotUTF8(t *testing.T) {
	tests := []struct {
		body   string
		asJSON bool
		want   map[string]any
	}{
		{"bin\xff\xfeok\x80", false, map[string]any{"body": "Ymlu//5va4A=", "body_base64": true}},
		{"bin\xff\xfeok\x80", true, map[string]any{"body": "Ymlu//5va4A=", "body_base64": true, "body_error": "body is not valid UTF-8"}},
		{`{"s": "` + "\xff" + `"}`, true, map[string]any{"body": "eyJzIjogIv8ifQ==", "body_base64": true, "body_error": "body is not valid UTF-8"}},
		{"café ☃", false, map[string]any{"body": "café ☃"}},
		{`{"s": "café ☃"}`, true, map[string]any{"body": map[string]any{"s": "café ☃"}}},
	}
	for _, tt := range tests {
		v := map[string]any{}
		setBody(v, []byte(tt.body), tt.asJSON)
		if !reflect.DeepEqual(v, tt.want) {
			t.Errorf("setBody(%q, json %v) = %q, want %q", tt.body, tt.asJSON, v, tt.want)
		}
	}
}
