package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
)

// TestFrameReportWithUnencodableCtx: a frame whose ctx assignments JSON
// cannot encode is reported as the frame's failure, its rows' outcomes
// kept, rather than as an encode error that loses the whole frame.done
// (and with it the frame's outcome).
func TestFrameReportWithUnencodableCtx(t *testing.T) {
	cyc := map[string]any{}
	cyc["self"] = cyc
	for _, bad := range []any{make(chan int), cyc} {
		w := &Worker{ID: "w"}
		cmd := &Command{ExecutionID: "x", ID: "loop#1@1", Kind: KindFrame, Run: "loop#1", Step: "loop", Frame: 1}
		items := []ItemOutcome{{Key: "r1", Outcome: OutcomeOK}}
		ev := w.event(context.Background(), cmd, eventlog.TypeFrameDone,
			frameDonePayload{Items: items, Counts: countOutcomes(items), Ctx: map[string]any{"bad": bad}})
		var p frameDonePayload
		if err := unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if ev.Type != eventlog.TypeFrameDone || !strings.Contains(p.Fail, "ctx.bad") || p.Counts.OK != 1 || len(p.Ctx) != 0 {
			t.Fatalf("%s %s", ev.Type, ev.Payload)
		}
	}
}

// TestEncodeJSONKeepsNonFiniteFloats: a non-finite float (1/0 in a
// template) is still recorded as a string, not refused, wherever it is.
func TestEncodeJSONKeepsNonFiniteFloats(t *testing.T) {
	zero := 0.0
	b, err := encodeJSON(completedPayload{Output: map[string]any{"r": 1 / zero},
		Outputs: []map[string]any{{"l": []any{-1 / zero}}}})
	if err != nil || !strings.Contains(string(b), `"r":"+Inf"`) || !strings.Contains(string(b), `"l":["-Inf"]`) {
		t.Fatalf("%s %v", b, err)
	}
}

// TestEncodeJSONBoundsNesting: a value nested past maxPayloadDepth is an
// error naming the bound, not a walk without end.
func TestEncodeJSONBoundsNesting(t *testing.T) {
	zero := 0.0
	v := any(1 / zero) // a non-finite float makes encoding fall back to the walk
	for range maxPayloadDepth + 5 {
		v = []any{v}
	}
	if _, err := encodeJSON(map[string]any{"deep": v}); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Fatalf("%v", err)
	}
}
