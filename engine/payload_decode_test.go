package engine

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
)

// TestMemberDecodersAgree: the fold's member-by-member reading of frame
// payloads gives what decoding them whole gives, and malformed payloads
// still fail.
func TestMemberDecodersAgree(t *testing.T) {
	t.Parallel()
	for _, payload := range []string{
		`{"rows":[{"key":"1","values":{"id":1,"payload":"a]}\""},"attempt":1}]}`,
		`{"rows":[]}`, `{}`, `{"Rows":[1]}`, `{"rows":null}`,
		`{"rows":[{"key":"2","values":{},"attempt":1}],"buried":["1","q\"<&>\u2028"]}`,
		`{"items":[{"key":"1","outcome":"ok","ms":2}],"counts":{"rows":1,"ok":1,"failed":0,"dead":0},"ctx":{"n":9007199254740993,"f":1.5},"fail":"x \"y\"","ms":3,"claim_open_us":12}`,
		`{"drained":true,"counts":{"rows":0,"ok":0,"failed":0,"dead":0}}`,
		`{"counts":{"rows":2,"ok":1,"failed":1,"dead":0},"fail":"","ctx":null}`,
		`{"counts":{"rows":2,"ok":1,"failed":1,"dead":0},"abandoned":["7","q\"]"]}`,
		`{"counts":{"rows":2,"ok":1,"failed":1,"dead":0},"abandoned":["7"],"unreleased":["8","q\"]"]}`,
		// counts in forms the engine does not write: read as unmarshal reads them
		`{"counts":{"Rows":2,"OK":1,"failed":1}}`, `{"counts":{"rows":null,"ok":3}}`,
		`{"counts":{"rows":2,"extra":[1],"dead":-0}}`, `{"counts":{"rows":1,"rows":4}}`,
		`{"counts":{}}`, `{"counts":null}`, `{"counts":{"\u0072ows":5}}`,
	} {
		ev := eventlog.Event{Payload: []byte(payload)}
		var fast, whole frameClaimedRaw
		if err := decode(ev, &fast); err != nil {
			t.Fatalf("%s: %v", payload, err)
		}
		if err := unmarshal(ev.Payload, &whole); err != nil {
			t.Fatal(err)
		}
		if string(fast.Rows) != string(whole.Rows) || !slices.Equal(fast.Buried, whole.Buried) {
			t.Errorf("%s: rows %s buried %q, decoded whole %s %q", payload, fast.Rows, fast.Buried, whole.Rows, whole.Buried)
		}
		var fd, wd frameDoneSummary
		if err := decode(ev, &fd); err != nil {
			t.Fatalf("%s: %v", payload, err)
		}
		if err := unmarshal(ev.Payload, &wd); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fd, wd) {
			t.Errorf("%s: summary %+v, decoded whole %+v", payload, fd, wd)
		}
	}
	// Both readings count the rows a frame left claimed.
	for _, p := range []string{`{"abandoned":["7","q\"]"]}`, `{"\u0061bandoned":["7","8"]}`} {
		var fd frameDoneSummary
		if err := decode(eventlog.Event{Payload: []byte(p)}, &fd); err != nil || fd.Abandoned != 2 {
			t.Errorf("%s: abandoned %d (%v), want 2", p, fd.Abandoned, err)
		}
	}
	// Both count the rows a cancel stopped (not a row that failed alone).
	for _, p := range []string{
		`{"items":[{"key":"1","outcome":"error","error":"execution cancelled: rows still running a lease after the cancel were interrupted"},{"key":"2","outcome":"error","error":"boom"},{"key":"3","outcome":"ok"}],"counts":{"rows":3,"ok":1,"failed":2,"dead":0},"released":2,"cancelled":true}`,
		`{"Items":[{"key":"1","outcome":"error","error":"execution cancelled before the row started"},{"key":"2","outcome":"error","error":"execution cancelled"}],"counts":{"rows":2,"ok":0,"failed":2,"dead":0}}`,
	} {
		var fd, wd frameDoneSummary
		if err := decode(eventlog.Event{Payload: []byte(p)}, &fd); err != nil {
			t.Fatal(err)
		}
		if err := unmarshal([]byte(p), &wd); err != nil {
			t.Fatal(err)
		}
		want := 1
		if strings.HasPrefix(p, `{"Items"`) {
			want = 2
		}
		if fd.Stopped != want || wd.Stopped != want {
			t.Errorf("%s: stopped %d, decoded whole %d, want %d", p, fd.Stopped, wd.Stopped, want)
		}
	}
	for _, p := range []string{`{"unreleased":["7","q\"]"]}`, `{"\u0075nreleased":["7","8"]}`} {
		var fd frameDoneSummary
		if err := decode(eventlog.Event{Payload: []byte(p)}, &fd); err != nil || fd.Unreleased != 2 {
			t.Errorf("%s: unreleased %d (%v), want 2", p, fd.Unreleased, err)
		}
	}
	for _, bad := range []string{`[1]`, `{"counts":{"rows":"x"}}`, `{"drained":1}`, `{"counts":{"rows":1.5}}`,
		`{"counts":{"ok":99999999999999999999}}`, `{"counts":[1]}`} {
		var fd frameDoneSummary
		if err := decode(eventlog.Event{Payload: []byte(bad)}, &fd); err == nil {
			t.Errorf("%s: decoded as %+v", bad, fd)
		}
	}
}

// TestPayloadAppendersAgree: frame.claimed and frame.done payloads encoded
// without reflection are byte for byte what encoding/json makes of them.
func TestPayloadAppendersAgree(t *testing.T) {
	t.Parallel()
	texts := []string{"", "a", `q"<&>\`, "ünï ✓ 😀", "\n\t\u2028\u2029", "\x00\x1f", "bad\xffx"}
	r := rand.New(rand.NewPCG(7, 8))
	text := func() string { return texts[r.IntN(len(texts))] }
	value := func() any {
		return []any{text(), int64(r.Int()), -r.Float64() * 1e21, 1e-9, nil, true, []any{text(), 1.5},
			map[string]any{text(): text(), "n": int64(-3)}}[r.IntN(8)]
	}
	for range 2000 {
		var rows []FrameRow
		for range r.IntN(4) {
			vals := map[string]any{}
			for range r.IntN(4) {
				vals[text()] = value()
			}
			rows = append(rows, FrameRow{Key: text(), Values: vals, Attempt: r.IntN(3), Token: []string{"", text()}[r.IntN(2)]})
		}
		claimed := frameClaimedPayload{Rows: rows}
		if r.IntN(5) == 0 {
			claimed.Rows = nil
		}
		if r.IntN(3) == 0 {
			claimed.Buried = []string{text(), text()}
		}
		var items []ItemOutcome
		for range r.IntN(4) {
			items = append(items, ItemOutcome{Key: text(), Outcome: []string{OutcomeOK, OutcomeError}[r.IntN(2)], Ms: int64(r.IntN(1000)), Error: []string{"", text()}[r.IntN(2)]})
		}
		done := frameDonePayload{Drained: r.IntN(2) == 0, Items: items, Counts: countOutcomes(items), Fail: []string{"", text()}[r.IntN(2)],
			Ms: int64(r.IntN(3)), Released: r.IntN(2), Returned: r.IntN(2), Cancelled: r.IntN(2) == 0, ClaimOpenUs: int64(r.IntN(2) * 77)}
		if r.IntN(2) == 0 {
			done.Ctx = map[string]any{text(): value()}
		}
		if r.IntN(3) == 0 {
			done.Abandoned = []string{text(), text()}
		}
		if r.IntN(3) == 0 {
			done.Unreleased = []string{text()}
		}
		for _, p := range []any{claimed, done} {
			want, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.(jsonAppender).appendJSON(nil)
			if err != nil || string(got) != string(want) {
				t.Fatalf("%T %+v:\n got %s (%v)\nwant %s", p, p, got, err, want)
			}
		}
	}
}

// TestNextFrameAfter: the next frame's id read from a frame command's id
// is the one nextFrameID builds from the command, at any attempt of it,
// and an id that is not a frame's has none.
func TestNextFrameAfter(t *testing.T) {
	for _, c := range []*Command{{Run: "start#1", Slot: 0, Frame: 1}, {Run: "drain.f#12", Slot: 7, Frame: 41}} {
		for _, attempt := range []int{1, 3} {
			id := commandID(frameBase(c.Run, c.Slot, c.Frame), attempt)
			if got, ok := nextFrameAfter(id, c.Frame); !ok || got != nextFrameID(c) {
				t.Fatalf("nextFrameAfter(%q) = %q, %v; want %q", id, got, ok, nextFrameID(c))
			}
		}
	}
	for _, id := range []string{"start#1@1", "no-attempt"} {
		if got, ok := nextFrameAfter(id, 1); ok {
			t.Fatalf("nextFrameAfter(%q) = %q, want none", id, got)
		}
	}
}
