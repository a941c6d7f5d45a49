package engine_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
)

// reflectedRow has FrameRow's fields and tags but not its MarshalJSON.
type reflectedRow engine.FrameRow

// TestFrameRowJSON checks that FrameRow's own encoding is encoding/json's.
func TestFrameRowJSON(t *testing.T) {
	t.Parallel()
	rows := []engine.FrameRow{
		{},
		{Key: "1", Values: map[string]any{"id": int64(1)}},
		{Key: `k"<&>` + "\u2028", Values: map[string]any{"payload": map[string]any{"n": 1.5, "s": "it's\n", "l": []any{nil, true, 1e21}}, "b": nil}, Attempt: 3, Token: "t\x01"},
		{Key: "x", Values: map[string]any{}, Token: "tok"},
	}
	for _, r := range rows {
		got, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(reflectedRow(r))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	if _, err := json.Marshal(engine.FrameRow{Values: map[string]any{"x": math.NaN()}}); err == nil {
		t.Error("a NaN encodes")
	}
}
