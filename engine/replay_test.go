package engine_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

var update = flag.Bool("update", false, "rewrite the golden event histories in testdata/replay")

// Worker-reported event types: everything else in a history is decided.
var reported = map[string]bool{
	eventlog.TypeCommandCompleted: true, eventlog.TypeCommandFailed: true,
	eventlog.TypeFrameClaimed: true, eventlog.TypeFrameDone: true,
	eventlog.TypeExecutionStarted: true,
}

// TestReplayGoldenHistories folds recorded histories and checks that they
// end where they ended when recorded, and that deciding on every prefix is
// deterministic.
func TestReplayGoldenHistories(t *testing.T) {
	playbooks, _ := filepath.Glob("testdata/replay/*.yaml")
	if len(playbooks) == 0 {
		t.Fatal("no playbooks in testdata/replay")
	}
	for _, pbPath := range playbooks {
		name := strings.TrimSuffix(filepath.Base(pbPath), ".yaml")
		t.Run(name, func(t *testing.T) {
			golden := strings.TrimSuffix(pbPath, ".yaml") + ".events.json"
			if *update {
				src, err := os.ReadFile(pbPath)
				if err != nil {
					t.Fatal(err)
				}
				b := setup(t, nil)
				sum, evs := b.run(t, string(src), nil)
				if sum.Status != engine.StatusCompleted {
					t.Fatalf("recording run ended %s: %s", sum.Status, sum.Error)
				}
				out, _ := json.MarshalIndent(evs, "", "  ")
				if err := os.WriteFile(golden, out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			raw, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./engine -run TestReplay -update)", err)
			}
			var h []eventlog.Event
			if err := json.Unmarshal(raw, &h); err != nil {
				t.Fatal(err)
			}
			id := h[0].ExecutionID
			final, err := engine.Fold(id, h)
			if err != nil {
				t.Fatal(err)
			}
			if final.Status != engine.StatusCompleted {
				t.Fatalf("golden history folds to %s", final.Status)
			}
			later := h[len(h)-1].Time.Add(time.Hour)
			if evs := final.Decide(later, nil, ""); len(evs) != 0 {
				t.Fatalf("a finished execution decided %d more events", len(evs))
			}
			for k := 1; k <= len(h); k++ {
				s1, err := engine.Fold(id, h[:k])
				if err != nil {
					t.Fatal(err)
				}
				s2, _ := engine.Fold(id, h[:k])
				d1 := s1.Decide(later, nil, "")
				d2 := s2.Decide(later, nil, "")
				if !reflect.DeepEqual(d1, d2) {
					t.Fatalf("cut at %d: two decisions differ:\n%v\n%v", k, d1, d2)
				}
				// Where the recorded history continued with decided events
				// after a single reported one, the decision on the cut must
				// reproduce them exactly.
				if k < len(h) && reported[h[k-1].Type] && !reported[h[k].Type] && (k < 2 || !reported[h[k-2].Type] || h[k-2].Type == eventlog.TypeExecutionStarted) {
					for i, ev := range d1 {
						if k+i >= len(h) || reported[h[k+i].Type] {
							break
						}
						want := h[k+i]
						if ev.Type != want.Type || ev.CommandID != want.CommandID || ev.Step != want.Step {
							t.Fatalf("cut at %d: decided %s %s %s, history has %s %s %s", k, ev.Type, ev.Step, ev.CommandID, want.Type, want.Step, want.CommandID)
						}
					}
				}
			}
		})
	}
}

// TestResumeFromEveryCut writes every prefix of a recorded history into a
// fresh log, resumes it with a fresh engine and checks that the execution
// completes without re-running any command the log says completed.
func TestResumeFromEveryCut(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"branches", "join"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile("testdata/replay/" + name + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			var check func(int, *engine.Summary, []eventlog.Event)
			if name == "join" {
				// However the history was cut, the join ran once.
				check = func(k int, _ *engine.Summary, evs []eventlog.Event) {
					bases := map[string]bool{}
					for _, ev := range evs {
						if ev.Type == eventlog.TypeCommandIssued && ev.Step == "reduce" {
							bases[ev.CommandID[:strings.LastIndexByte(ev.CommandID, '@')]] = true
						}
					}
					if len(bases) != 1 {
						t.Fatalf("cut at %d: reduce ran as %d commands, want one", k, len(bases))
					}
				}
			}
			resumeFromEveryCut(t, string(src), check)
		})
	}
}

// resumeFromEveryCut runs src, then writes every prefix of its history
// into a fresh log, resumes it with a fresh engine and checks that the
// execution completes without re-running any command the log says
// completed; check, if set, looks at each resumed execution's summary and
// whole history too.
func resumeFromEveryCut(t *testing.T, src string, check func(k int, got *engine.Summary, evs []eventlog.Event)) {
	t.Helper()
	resumeFromEveryCutWith(t, func() engine.Config { return engine.Config{} }, src, check)
}

// resumeFromEveryCutWith is resumeFromEveryCut with every engine, the first
// and each fresh one, made from cfg() (with its own log; a Tools registry
// cfg returns must be a new one each time, since the recorder is added to it).
func resumeFromEveryCutWith(t *testing.T, cfg func() engine.Config, src string, check func(k int, got *engine.Summary, evs []eventlog.Event)) {
	t.Helper()
	b := setupWith(t, cfg())
	sum, h := b.run(t, src, nil)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("first run: %s %s", sum.Status, sum.Error)
	}
	for k := 1; k < len(h); k++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		log := eventlog.NewMemory()
		prefix := make([]eventlog.Event, k)
		copy(prefix, h[:k])
		if _, err := log.Append(ctx, prefix); err != nil {
			t.Fatal(err)
		}
		c := cfg()
		c.Log = log
		fresh := setupWith(t, c)
		if err := fresh.eng.Resume(ctx, h[0].ExecutionID); err != nil {
			t.Fatalf("cut at %d: resume: %v", k, err)
		}
		got, err := fresh.eng.Wait(ctx, h[0].ExecutionID)
		cancel()
		if err != nil {
			t.Fatalf("cut at %d: %v", k, err)
		}
		if got.Status != engine.StatusCompleted {
			t.Fatalf("cut at %d: resumed execution ended %s: %s", k, got.Status, got.Error)
		}
		for _, ev := range h[:k] {
			if ev.Type != eventlog.TypeCommandCompleted {
				continue
			}
			base := ev.CommandID[:strings.LastIndexByte(ev.CommandID, '@')]
			if n := fresh.rec.countCommand(base); n != 0 {
				t.Fatalf("cut at %d: command %s completed before the cut but ran %d more times", k, base, n)
			}
		}
		if check != nil {
			evs, err := log.Read(context.Background(), h[0].ExecutionID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			check(k, got, evs)
		}
		_ = fresh.eng.Close()
	}
}
