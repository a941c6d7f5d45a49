package engine_test

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestLostAttemptHoldsTheDrain: the first frame's worker takes it, claims
// every row and stalls before the claim is on record (a paused process:
// its claim stays open, so the rows stay out of the other claims' reach).
// Its lease runs out and the frame is re-issued; the re-issue claims
// nothing. That must not end the loop: the source gives the stalled
// claim's rows back a frame lease after the loss (a transaction's idle
// timeout, a lease), so the slot claims again once that time is over, and
// the rows run. Before, the loop completed at once with every row left
// unrun.
func TestLostAttemptHoldsTheDrain(t *testing.T) {
	t.Parallel()
	b := newOutageBench(t)
	first := b.latest(t)
	b.crashOnTake(t, first)
	// The stalled claim, made and never recorded: its rows are out of
	// the natural claim's reach (WHERE status = 'pending') as locked
	// rows are out of a SKIP LOCKED claim's.
	if _, err := b.db.Exec(`UPDATE jobs SET status = 'claimed'`); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(untakenLapse)
	lost := b.latest(t)
	if lost.ID != "start#1/s0.f1@2" || len(lost.Rows) != 0 {
		t.Fatalf("after the taken attempt expired: %s with %d rows, want start#1/s0.f1@2 without rows", lost.ID, len(lost.Rows))
	}
	lostAt := b.clk.Now()
	if err := b.e.Worker().Execute(b.ctx, lost, b.e.Reporter()); err != nil {
		t.Fatal(err)
	}
	held := b.latest(t)
	st, err := engine.Inspect(b.ctx, b.log, b.id)
	if err != nil || st.Status != engine.StatusRunning {
		t.Fatalf("after a claim found nothing within a lease of the loss: status %v (%v), want the loop still running", st.Status, err)
	}
	// The status says how long the loop waits, so that a run that looks
	// idle (every row it could reach done) says why it does not end.
	if got, want := st.Loops["start#1"].HoldUntil, lostAt.Add(untakenLease+time.Second); got.Before(want.Add(-2*time.Millisecond)) || got.After(want.Add(2*time.Millisecond)) {
		t.Fatalf("loop status hold_until = %v, want %v (a frame lease and a second after the loss)", got, want)
	}
	// The hold runs a frame lease (10 s) and a second from the loss.
	if wantHold := untakenLease + time.Second - b.clk.Now().Sub(lostAt); held.ID != "start#1/s0.f2@1" || held.Hold < wantHold || held.Hold > wantHold+2*time.Millisecond {
		t.Fatalf("after the empty claim: %s holding %v, want start#1/s0.f2@1 holding %v", held.ID, held.Hold, wantHold)
	}
	// The source takes the stalled claim back.
	if _, err := b.db.Exec(`UPDATE jobs SET status = 'pending' WHERE status = 'claimed'`); err != nil {
		t.Fatal(err)
	}
	// The worker runs what it is sent from here; the fake clock does not
	// move, so a frame that holds is run as after its wait: its claim
	// comes once the hold is over.
	holds := 0
	sum := b.runEach(t, held, func(cmd *engine.Command) *engine.Command {
		if cmd.Hold == 0 {
			return cmd
		}
		holds++
		c := *cmd
		c.Hold = 0
		return &c
	})
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if st, err := engine.Inspect(b.ctx, b.log, b.id); err != nil || !st.Loops["start#1"].HoldUntil.IsZero() {
		t.Fatalf("finished loop: hold_until %v (%v), want none", st.Loops["start#1"].HoldUntil, err)
	}
	if st := b.statuses(t); st["done"] != 6 {
		t.Fatalf("job statuses %v, want the 6 rows done", st)
	}
	b.mu.Lock()
	for id, n := range b.ran {
		if n != 1 {
			t.Errorf("row %s ran %d times, want once", id, n)
		}
	}
	if len(b.ran) != 6 {
		t.Errorf("%d rows ran, want 6", len(b.ran))
	}
	b.mu.Unlock()
	// The frame that found the source empty once the rows had run was
	// issued within the hold too (the clock stood still), so it held.
	if holds != 2 {
		t.Errorf("%d frames held, want 2: the one after the lost attempt's empty claim and the last", holds)
	}
	if _, err := engine.Fold(b.id, b.events(t)); err != nil {
		t.Fatalf("the history does not fold: %v", err)
	}
}

// TestEmptyClaimUnderEarlierSemantics: a history recorded before the hold
// (semantics 5) ends its loop on the first claim that finds nothing, lost
// attempt or not, as it did when it was recorded; under the current
// semantics the same history issues a frame that holds instead.
func TestEmptyClaimUnderEarlierSemantics(t *testing.T) {
	t.Parallel()
	b := newOutageBench(t)
	emptyAfterStall(t, b)
	b.settle()
	h := b.events(t)
	k := slices.IndexFunc(h, func(ev eventlog.Event) bool {
		return ev.Type == eventlog.TypeFrameDone && strings.Contains(string(ev.Payload), `"drained":true`)
	})
	if k < 0 {
		t.Fatal("no frame found the source empty")
	}
	for _, level := range []int{5, 0} { // 0: the history as recorded, at the current level
		hist := slices.Clone(h[:k+1])
		if level > 0 {
			var started map[string]any
			if err := json.Unmarshal(hist[0].Payload, &started); err != nil {
				t.Fatal(err)
			}
			started["semantics"] = level
			hist[0].Payload, _ = json.Marshal(started)
		}
		s, err := engine.Fold(b.id, hist)
		if err != nil {
			t.Fatal(err)
		}
		evs := s.Decide(hist[k].Time, nil, "")
		done := slices.ContainsFunc(evs, func(ev eventlog.Event) bool { return ev.Type == eventlog.TypeLoopDone })
		held := slices.ContainsFunc(evs, func(ev eventlog.Event) bool {
			return ev.Type == eventlog.TypeCommandIssued && strings.Contains(string(ev.Payload), `"hold_ms":`)
		})
		if level == 5 && (!done || held) {
			t.Errorf("semantics 5: decided %v, want the loop done", evs)
		}
		if level == 0 && (done || !held) {
			t.Errorf("current semantics: decided %v, want a frame that holds", evs)
		}
	}
}

// TestCancelEndsAHoldingFrame: the execution is cancelled while the
// slot's frame waits out the hold after a lost attempt (Command.Hold, a
// frame lease and a second: 11 s here). The frame stops at once and the
// execution ends cancelled, as a frame stops between rows; before, the
// worker slept the whole hold out, and the cancel waited for it.
func TestCancelEndsAHoldingFrame(t *testing.T) {
	t.Parallel()
	holding := make(chan struct{})
	b := newOutageBenchLogging(t, slog.New(signalHandler{Handler: slog.DiscardHandler,
		match: "claiming again once the source has taken them back", once: &sync.Once{}, seen: holding}))
	emptyAfterStall(t, b)
	held := b.latest(t)
	if held.Hold < untakenLease {
		t.Fatalf("%s holds %v, want a frame lease or more", held.ID, held.Hold)
	}
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- b.e.Worker().Execute(b.ctx, held, b.e.Reporter()) }()
	select {
	case <-holding:
	case <-b.ctx.Done():
		t.Fatal("the frame did not start its hold")
	}
	if err := b.e.Cancel(b.ctx, b.id); err != nil {
		t.Fatal(err)
	}
	// The orchestrator tells its workers of the cancel (Worker.Cancel);
	// this bench's worker is the engine's own, told directly.
	b.e.Worker().Cancel(b.id)
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(held.Hold / 2):
		t.Fatalf("the holding frame still runs %v after the cancel; its hold is %v", time.Since(start), held.Hold)
	}
	b.settle()
	sum, err := b.e.Wait(b.ctx, b.id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCancelled {
		t.Fatalf("status %s (%s), want cancelled", sum.Status, sum.Error)
	}
}

// emptyAfterStall plays the first frame's worker taking it and stalling
// with every row claimed, unrecorded (out of the natural claim's reach);
// the lease runs out, and the re-issued attempt runs and finds nothing.
func emptyAfterStall(t *testing.T, b *outageBench) {
	t.Helper()
	b.crashOnTake(t, b.latest(t))
	if _, err := b.db.Exec(`UPDATE jobs SET status = 'claimed'`); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(untakenLapse)
	if err := b.e.Worker().Execute(b.ctx, b.latest(t), b.e.Reporter()); err != nil {
		t.Fatal(err)
	}
}

// TestResumedFrameHoldsTheDrain: the process driving the execution dies
// while a worker elsewhere (which outlives it) has claimed every row and
// not yet recorded the claim (its transaction open, its rows out of the
// other claims' reach). Another process resumes the execution and issues
// the frame again; that attempt finds nothing. It must not end the loop:
// the first attempt's claim is given back once its report is refused (or,
// if its worker stalled, a frame lease later), and its rows must run.
// Before, the loop completed at once with every row unrun.
func TestResumedFrameHoldsTheDrain(t *testing.T) {
	t.Parallel()
	b := newOutageBench(t)
	if first := b.latest(t); first.ID != "start#1/s0.f1@1" {
		t.Fatalf("first command %s", first.ID)
	}
	if _, err := b.db.Exec(`UPDATE jobs SET status = 'claimed'`); err != nil {
		t.Fatal(err)
	}
	if err := b.e.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := b.cfg
	d := &holdingDispatcher{}
	cfg.Dispatcher = d
	e2, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e2.Close() })
	if err := e2.Resume(b.ctx, b.id); err != nil {
		t.Fatal(err)
	}
	settle := settler(b.ctx, t, e2)
	settle()
	cmds := d.issued()
	if len(cmds) != 1 || cmds[0].ID != "start#1/s0.f1@2" || len(cmds[0].Rows) != 0 {
		t.Fatalf("resumed: issued %v, want start#1/s0.f1@2 without rows", cmds)
	}
	if err := e2.Worker().Execute(b.ctx, cmds[0], e2.Reporter()); err != nil {
		t.Fatal(err)
	}
	settle()
	if st, err := engine.Inspect(b.ctx, b.log, b.id); err != nil || st.Status != engine.StatusRunning {
		t.Fatalf("after the resumed frame found nothing while the first attempt held the rows: status %v (%v), want the loop still running", st.Status, err)
	}
	cmds = d.issued()
	if last := cmds[len(cmds)-1]; last.ID != "start#1/s0.f2@1" || last.Hold < untakenLease {
		t.Fatalf("after the empty claim: %s holding %v, want start#1/s0.f2@1 holding a lease or more", last.ID, last.Hold)
	}
}
