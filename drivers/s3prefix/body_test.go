package s3prefix

import "testing"

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
