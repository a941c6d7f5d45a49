package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// loopBack re-enters a collection loop step n times.
const loopBack = header + `
workload: {n: 150}
workflow:
  - step: start
    loop:
      in: '{{ [1, 2, 3] }}'
      iterator: x
    tool: {kind: rec, key: 'item'}
    set:
      ctx.rounds: '{{ (ctx.rounds | default(0)) + 1 }}'
    next:
      spec: {mode: exclusive}
      arcs:
        - step: start
          when: '{{ ctx.rounds < n }}'
        - step: end
  - step: end
    tool: {kind: rec, key: end}
`

// TestFinishedLoopsAndRunsAreCompacted: a long-lived execution that loops
// back keeps only the work in hand, not every run and loop it ever had.
func TestFinishedLoopsAndRunsAreCompacted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, loopBack, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || b.rec.count("item") != 450 {
		t.Fatalf("status %s, %d items: %s", sum.Status, b.rec.count("item"), sum.Error)
	}
	if sum.Steps["start"] != "completed" || sum.Steps["end"] != "completed" {
		t.Fatalf("steps %v", sum.Steps)
	}
	// Fold every prefix's end: the state holds what is under way only.
	maxRuns, maxLoops := 0, 0
	st := engine.NewState(evs[0].ExecutionID)
	for _, ev := range evs {
		if err := st.Apply(ev); err != nil {
			t.Fatal(err)
		}
		maxRuns, maxLoops = max(maxRuns, len(st.Runs)), max(maxLoops, len(st.Loops))
	}
	if maxRuns > 2 || maxLoops > 1 || len(st.Runs) != 0 || len(st.Loops) != 0 {
		t.Fatalf("state grew with the loop-backs: up to %d runs and %d loops held (now %d, %d)", maxRuns, maxLoops, len(st.Runs), len(st.Loops))
	}
	// The status still reports the last loop of the step.
	status := st.Snapshot()
	if ls, ok := status.Loops["start#150"]; !ok || ls.Items != 3 || ls.Done != 3 || !ls.Finished || len(status.Loops) != 1 {
		t.Fatalf("loops in status: %+v", status.Loops)
	}
}

// TestRepeatedDecisionFoldsOnce: a second copy of a decided event (a
// deposed leader's late step.completed) changes nothing: the successors
// are not queued twice.
func TestRepeatedDecisionFoldsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, twoSteps, nil)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s", sum.Status)
	}
	// Cut the history after start's step.completed and append a copy of it.
	var cut []eventlog.Event
	for _, ev := range evs {
		cut = append(cut, ev)
		if ev.Type == eventlog.TypeStepCompleted && ev.Step == "start" {
			dup := ev
			dup.Seq = ev.Seq + 1
			cut = append(cut, dup)
			break
		}
	}
	st, err := engine.Fold(evs[0].ExecutionID, cut)
	if err != nil {
		t.Fatal(err)
	}
	out := st.Decide(time.Now(), nil, "")
	issued := 0
	for _, ev := range out {
		if ev.Type == eventlog.TypeCommandIssued {
			issued++
			var p struct{ Run string }
			_ = json.Unmarshal(ev.Payload, &p)
			if p.Run != "second#1" {
				t.Errorf("issued %s", p.Run)
			}
		}
	}
	if issued != 1 {
		t.Fatalf("decided %d command.issued after a repeated step.completed, want 1: %v", issued, out)
	}
	// And through a live engine: resume the doubled history.
	fresh := resumeToCompletion(t, cut)
	if n := fresh.rec.count("second"); n != 1 {
		t.Fatalf("second ran %d times", n)
	}
}

// TestLateLeaseReissueFoldsAsStale: a lease re-issue of a command whose
// outcome is already on record (another orchestrator's late decision, as
// when two processes drove one execution) does not bring the command back
// in flight: the execution still ends, in the fold and when resumed.
func TestLateLeaseReissueFoldsAsStale(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, twoSteps, nil)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s", sum.Status)
	}
	var cut []eventlog.Event
	for _, ev := range evs {
		if ev.Type == eventlog.TypeExecutionCompleted {
			break
		}
		cut = append(cut, ev)
	}
	var late eventlog.Event
	for _, ev := range cut {
		if ev.Type == eventlog.TypeCommandIssued && ev.Step == "start" {
			late = ev
			break
		}
	}
	var p map[string]any
	if err := json.Unmarshal(late.Payload, &p); err != nil {
		t.Fatal(err)
	}
	p["reason"] = "lease"
	late.Payload, _ = json.Marshal(p)
	late.CommandID = strings.Replace(late.CommandID, "@1", "@2", 1)
	late.Attempt, late.Seq = 2, cut[len(cut)-1].Seq+1
	cut = append(cut, late)

	st, err := engine.Fold(evs[0].ExecutionID, cut)
	if err != nil {
		t.Fatal(err)
	}
	if inflight := st.InFlight(); len(inflight) != 0 {
		t.Fatalf("in flight after a late re-issue: %v", inflight)
	}
	out := st.Decide(time.Now(), nil, "")
	if len(out) != 1 || out[0].Type != eventlog.TypeExecutionCompleted {
		t.Fatalf("decided %v, want execution.completed", out)
	}
	resumeToCompletion(t, cut)
}

// resumeToCompletion appends history to a fresh log, resumes its
// execution on a fresh engine and waits for it to complete.
func resumeToCompletion(t *testing.T, history []eventlog.Event) *bundle {
	t.Helper()
	log := eventlog.NewMemory()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := log.Append(ctx, history); err != nil {
		t.Fatal(err)
	}
	fresh := setup(t, log)
	id := history[0].ExecutionID
	if err := fresh.eng.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	got, err := fresh.eng.Wait(ctx, id)
	if err != nil || got.Status != engine.StatusCompleted {
		t.Fatalf("%v %+v", err, got)
	}
	return fresh
}
