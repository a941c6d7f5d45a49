package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
	"github.com/cursorflow/cursorflow/tools/shell"
)

type partialEvent struct {
	Task    string          `json:"task"`
	Row     string          `json:"row"`
	Seq     int             `json:"seq"`
	Data    json.RawMessage `json:"data"`
	Dropped int             `json:"dropped"`
}

func partialsOf(t *testing.T, evs []eventlog.Event) []partialEvent {
	t.Helper()
	var out []partialEvent
	for _, ev := range evs {
		if ev.Type != eventlog.TypeCallPartial {
			continue
		}
		var p partialEvent
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestPartialResultsWhileRunning: a shell step's output lines are in the
// log as call.partial events while the step still runs (it waits for a
// file the test creates only once it read the second line from the log),
// in order, before the command's completion.
func TestPartialResultsWhileRunning(t *testing.T) {
	t.Parallel()
	log := eventlog.NewMemory()
	reg := tools.NewRegistry()
	reg.MustRegister("shell", shell.New(shell.Config{}))
	eng, err := engine.New(engine.Config{Log: log, Tools: reg, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	gate := filepath.Join(t.TempDir(), "gate")
	src := header + `
workload:
  gate: ` + gate + `
workflow:
  - step: start
    tool:
      kind: shell
      command: 'echo one; echo two; while [ ! -e "{{ gate }}" ]; do sleep 0.01; done; echo three'
    next: [end]
  - step: end
    tool: {kind: shell, command: "true"}
`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := eng.Start(ctx, []byte(src), engine.StartOptions{File: "partial.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	var seen int64
	for lines := ""; !strings.Contains(lines, `"two"`); {
		if err := log.Wait(ctx, id, seen); err != nil {
			t.Fatalf("waiting for the second line in the log: %v", err)
		}
		evs, err := log.Read(ctx, id, seen, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			seen = ev.Seq
			if ev.Type == eventlog.TypeCommandCompleted {
				t.Fatalf("the command completed before its lines were seen")
			}
			if ev.Type == eventlog.TypeCallPartial {
				lines += string(ev.Payload)
			}
		}
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("summary %+v, %v", sum, err)
	}
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dumpOnFail(t, evs)
	var lines []string
	completed := false
	for _, ev := range evs {
		switch {
		case ev.Type == eventlog.TypeCommandCompleted && ev.Step == "start":
			completed = true
		case ev.Type == eventlog.TypeCallPartial:
			if completed || ev.Step != "start" || ev.CommandID != "start#1@1" {
				t.Fatalf("partial %d: step %s command %s after completion %v", ev.Seq, ev.Step, ev.CommandID, completed)
			}
			var p struct {
				Seq  int
				Data struct{ Stream, Line string }
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Seq != len(lines)+1 || p.Data.Stream != "stdout" {
				t.Fatalf("partial %d: %s", ev.Seq, ev.Payload)
			}
			lines = append(lines, p.Data.Line)
		}
	}
	if strings.Join(lines, ",") != "one,two,three" {
		t.Fatalf("lines %q", lines)
	}
	// The fold ignores them: every decision replays the same without them.
	assertSameDecisions(t, evs)
}

// assertSameDecisions folds every prefix of evs with and without its
// call.partial events and checks that both states decide the same.
func assertSameDecisions(t *testing.T, evs []eventlog.Event) {
	t.Helper()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for k := 1; k <= len(evs); k++ {
		var without []eventlog.Event
		for _, ev := range evs[:k] {
			if ev.Type != eventlog.TypeCallPartial {
				without = append(without, ev)
			}
		}
		a, err := engine.Fold(evs[0].ExecutionID, evs[:k])
		if err != nil {
			t.Fatal(err)
		}
		b, err := engine.Fold(evs[0].ExecutionID, without)
		if err != nil {
			t.Fatal(err)
		}
		da, db := a.Decide(now, nil, ""), b.Decide(now, nil, "")
		if len(da) != len(db) {
			t.Fatalf("cut %d: %d decisions with partials, %d without", k, len(da), len(db))
		}
		for i := range da {
			if da[i].Type != db[i].Type || da[i].CommandID != db[i].CommandID || string(da[i].Payload) != string(db[i].Payload) {
				t.Fatalf("cut %d: decision %d differs: %s %s vs %s %s", k, i, da[i].Type, da[i].Payload, db[i].Type, db[i].Payload)
			}
		}
		if !reflect.DeepEqual(a.Results, b.Results) || a.Status != b.Status {
			t.Fatalf("cut %d: states differ", k)
		}
	}
}

// TestPartialLimits: a tool handing on more partials than the bounds let
// through: the burst is recorded, the rest counted as dropped in a last
// partial, data over the size bound is recorded as its size.
func TestPartialLimits(t *testing.T) {
	t.Parallel()
	log := eventlog.NewMemory()
	reg := tools.NewRegistry()
	reg.MustRegister("chatty", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		call.EmitPartial(map[string]any{"blob": strings.Repeat("x", 500)})
		for i := range 49 {
			call.EmitPartial(map[string]any{"i": i})
		}
		return "done", nil
	}))
	eng, err := engine.New(engine.Config{Log: log, Tools: reg, Tick: 5 * time.Millisecond,
		Partials: engine.PartialLimits{MaxBytes: 100, Burst: 5, PerSecond: 1e-9}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	b := &bundle{log: log, eng: eng}
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      - talk: {kind: chatty}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	ps := partialsOf(t, evs)
	if len(ps) != 6 {
		t.Fatalf("%d partials, want the burst of 5 and one counting the dropped", len(ps))
	}
	if string(ps[0].Data) != `{"_truncated":true,"_size":511}` || ps[0].Task != "talk" {
		t.Fatalf("first partial %+v: want its size instead of its 511 bytes", ps[0])
	}
	for i, p := range ps[1:5] {
		if p.Seq != i+2 || string(p.Data) != `{"i":`+string(rune('0'+i))+`}` || p.Dropped != 0 {
			t.Fatalf("partial %d: %+v", i+2, p)
		}
	}
	if last := ps[5]; last.Seq != 6 || last.Dropped != 45 || len(last.Data) != 0 {
		t.Fatalf("last partial %+v: want 45 dropped and no data", last)
	}
}
