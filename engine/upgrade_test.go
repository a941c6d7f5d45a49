package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestResumeRefusesNewerSemantics: an operator rolls back to an older
// build while an execution a newer build started is unfinished. The
// newer build recorded its own semantics level in execution.started; an
// older engine that drove it on would decide under its older rules (a
// loop's aggregate read as a list, ctx and workload apart, ...) and the
// execution would go on differently than it began. Resume refuses it,
// naming both levels, and records nothing, so the newer build can still
// resume it as it began.
func TestResumeRefusesNewerSemantics(t *testing.T) {
	for _, lc := range startLogs {
		t.Run(lc.name, func(t *testing.T) {
			log := lc.open(t)
			b := setupWith(t, engine.Config{Log: log})
			// What a build whose semantics are past this one's records.
			started, err := json.Marshal(map[string]any{"playbook": onceBook, "semantics": 999})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := log.Append(t.Context(), []eventlog.Event{{ExecutionID: "from-newer", Type: eventlog.TypeExecutionStarted, Payload: started}}); err != nil {
				t.Fatal(err)
			}
			err = b.eng.Resume(t.Context(), "from-newer")
			if !errors.Is(err, engine.ErrNewerSemantics) || !strings.Contains(err.Error(), "999") {
				t.Fatalf("Resume = %v, want ErrNewerSemantics naming level 999", err)
			}
			if n := b.rec.count("once"); n != 0 {
				t.Errorf("the step ran %d times under an older build's rules", n)
			}
			evs, err := log.Read(t.Context(), "from-newer", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 {
				t.Errorf("the refused resume recorded %d events, want none past execution.started", len(evs)-1)
			}
		})
	}
}

// wideBook is a playbook releases before the bound on max_in_flight
// (10000) accepted and ran.
const wideBook = header + `
workflow:
  - step: start
    loop:
      in: "{{ range(3) | list }}"
      iterator: n
      spec: {mode: parallel, max_in_flight: 20000}
    tool: {kind: rec, key: wide}
`

// TestResumeOfARecordedPlaybookThisBuildRefuses: an execution an earlier
// release started (semantics 1, a850dca's) with a playbook that release
// accepted and this build refuses (a bound added since) is left
// unfinished by a kill; after the upgrade, resume (and status) cannot
// replay it. The refusal says so and where to finish it, besides the
// diagnostic, which alone read as a mistake in a file; nothing runs and
// nothing is recorded.
func TestResumeOfARecordedPlaybookThisBuildRefuses(t *testing.T) {
	for _, lc := range startLogs {
		t.Run(lc.name, func(t *testing.T) {
			log := lc.open(t)
			b := setupWith(t, engine.Config{Log: log})
			started, err := json.Marshal(map[string]any{"playbook": wideBook, "file": "wide.yaml", "semantics": 1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := log.Append(t.Context(), []eventlog.Event{{ExecutionID: "from-older", Type: eventlog.TypeExecutionStarted, Payload: started}}); err != nil {
				t.Fatal(err)
			}
			err = b.eng.Resume(t.Context(), "from-older")
			var list dsl.ErrorList
			if !errors.Is(err, engine.ErrRecordedPlaybook) || !errors.As(err, &list) || !strings.Contains(err.Error(), "finish it with that release") {
				t.Fatalf("Resume = %v, want ErrRecordedPlaybook with the diagnostics and what to do", err)
			}
			if _, err := engine.Inspect(t.Context(), log, "from-older"); !errors.Is(err, engine.ErrRecordedPlaybook) {
				t.Errorf("Inspect = %v, want ErrRecordedPlaybook", err)
			}
			if n := b.rec.count("wide"); n != 0 {
				t.Errorf("the loop ran %d items", n)
			}
			if evs, err := log.Read(t.Context(), "from-older", 0, 0); err != nil || len(evs) != 1 {
				t.Errorf("the log holds %d events (%v), want execution.started alone", len(evs), err)
			}
		})
	}
}

// TestProjectionAfterUpgradeIgnoresOlderSnapshot: a server replica
// restarted on this build continues an execution's status from the
// snapshot an earlier build saved. That build wrote the same
// SnapshotFormat (cursorflow.engine.state/7) as this one did at first,
// but this one's loop state counts the items a cancel stopped
// (loopState.Cancelled), which its snapshots lack: restored, the
// snapshot's cancelled items were lost, and the status said 3 done and
// failed where the fold of the same events says 3 cancelled. A snapshot
// of another shape must go by another format name, so that it is folded
// past instead.
func TestProjectionAfterUpgradeIgnoresOlderSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      in: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
      iterator: i
      spec: {mode: parallel, max_in_flight: 3}
    tool: {kind: rec, key: 'i{{ iter.i }}', sleep_ms: 60000}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"i0", "i1", "i2"} {
		b.waitForCall(t, ctx, k)
	}
	if err := b.eng.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	h, err := b.log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The earlier build's replica saw the history up to just before the
	// end, with the cancelled items on record, and saved its snapshot.
	// Its snapshot is this build's, less what that build did not have.
	cut := len(h) - 1
	scratch := eventlog.NewMemory()
	if _, err := scratch.Append(ctx, h[:cut]); err != nil {
		t.Fatal(err)
	}
	first, _ := newProjection(t, scratch, 1)
	if _, err := first.Status(ctx, id); err != nil {
		t.Fatal(err)
	}
	snap, err := scratch.LoadSnapshot(ctx, id, engine.SnapshotFormat)
	if err != nil || snap.Seq != int64(cut) {
		t.Fatalf("snapshot after %d events: seq %d, %v", cut, snap.Seq, err)
	}
	var data map[string]any
	if err := json.Unmarshal(snap.Data, &data); err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"Loops", "DoneLoops"} {
		loops, _ := data[set].(map[string]any)
		for _, l := range loops {
			delete(l.(map[string]any), "Cancelled")
		}
	}
	snap.Data, _ = json.Marshal(data)
	snap.Format = "cursorflow.engine.state/7"
	log := eventlog.NewMemory()
	if _, err := log.Append(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := log.SaveSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	restarted, _ := newProjection(t, log, 1000)
	st, err := restarted.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := inspect(t, log, id)
	if want.Loops["start#1"].Cancelled != 3 {
		t.Fatalf("the fold counts %d cancelled items, want 3", want.Loops["start#1"].Cancelled)
	}
	if !sameStatus(st, want) {
		t.Fatalf("from the earlier build's snapshot:\n%+v\nfold:\n%+v", st.Loops, want.Loops)
	}
}

// TestListWithARecordedPlaybookThisBuildRefuses: after an upgrade, the
// log holds an execution an earlier release started with a playbook this
// build refuses, beside others. Listing executions (GET /v1/executions,
// the dashboard's first page) failed as a whole with that one's
// refusal, and the leader's projection refresh stopped at it, leaving
// the executions after it unrefreshed. The list leaves it out (its
// status says why) and the refresh goes past it.
func TestListWithARecordedPlaybookThisBuildRefuses(t *testing.T) {
	log := eventlog.NewMemory()
	for _, ex := range []struct{ id, book string }{{"ok-before", onceBook}, {"from-older", wideBook}, {"ok-after", onceBook}} {
		started, err := json.Marshal(map[string]any{"playbook": ex.book, "file": ex.id + ".yaml", "semantics": 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := log.Append(t.Context(), []eventlog.Event{{ExecutionID: ex.id, Type: eventlog.TypeExecutionStarted, Payload: started}}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := engine.NewProjection(engine.ProjectionConfig{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	list, err := p.List(t.Context(), engine.ListOptions{})
	if err != nil {
		t.Fatalf("List = %v, want the executions this build can read", err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ExecutionID)
	}
	if strings.Join(ids, ",") != "ok-after,ok-before" {
		t.Errorf("List = %v, want ok-after, ok-before", ids)
	}
	if err := p.Refresh(t.Context()); err != nil {
		t.Errorf("Refresh = %v, want the refused execution passed over", err)
	}
	if _, err := p.Status(t.Context(), "from-older"); !errors.Is(err, engine.ErrRecordedPlaybook) {
		t.Errorf("Status = %v, want ErrRecordedPlaybook", err)
	}
}
