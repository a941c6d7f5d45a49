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
	b := newOutageBenchOn(t, "postgres", nil)
	first := b.latest(t)
	b.crashOnTake(t, first)
	// The stalled claim, made and never recorded: its transaction stays
	// open, its rows out of the natural claim's reach (SKIP LOCKED).
	takeBack := b.stall(t)
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
	takeBack()
	// The worker runs what it is sent from here (runHeld).
	holds := 0
	sum := b.runEach(t, held, runHeld(&holds))
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

// runHeld is outageBench.runEach's each for a worker whose fake clock
// does not move: a frame that holds (Command.Hold) runs as after its
// wait, its claim once the hold is over. It counts such frames in holds.
func runHeld(holds *int) func(*engine.Command) *engine.Command {
	return func(cmd *engine.Command) *engine.Command {
		if cmd.Hold == 0 {
			return cmd
		}
		*holds++
		c := *cmd
		c.Hold = 0
		return &c
	}
}

// TestEmptyClaimUnderEarlierSemantics: a history recorded before the hold
// (semantics 5) ends its loop on the first claim that finds nothing, lost
// attempt or not, as it did when it was recorded; under the current
// semantics the same history issues a frame that holds instead.
func TestEmptyClaimUnderEarlierSemantics(t *testing.T) {
	t.Parallel()
	b := newOutageBenchOn(t, "postgres", nil)
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
	b := newOutageBenchOn(t, "postgres", slog.New(signalHandler{Handler: slog.DiscardHandler,
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
	b.stall(t)
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
	b := newOutageBenchOn(t, "postgres", nil)
	if first := b.latest(t); first.ID != "start#1/s0.f1@1" {
		t.Fatalf("first command %s", first.ID)
	}
	b.stall(t)
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

// TestExclusiveSourceDoesNotHold: a worker takes a frame and dies
// before it claims, twice: once before any frame finished, once after.
// Each loss may leave rows claimed and unrecorded. On PostgreSQL, whose
// claims skip each other's locked rows, a claim that finds nothing proves
// nothing, so each loss holds the drain a frame lease and a second, and
// the last claim, which finds nothing within the hold (the fake clock
// stands still), is made again after it. On SQLite a claim holds the write
// lock, so no claim finds nothing while another holds rows
// (cursor.Features.ExclusiveClaim): every frame.done says so, the first
// one ends the hold the first loss began, the second loss holds nothing,
// and the drain ends at once, where it waited a minute (the default
// lease) after every crash before.
func TestExclusiveSourceDoesNotHold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		source    string
		exclusive bool
		holds     int
	}{
		{source: "sqlite", exclusive: true, holds: 0},
		{source: "postgres", exclusive: false, holds: 1},
	} {
		t.Run(tc.source, func(t *testing.T) {
			t.Parallel()
			b := newOutageBenchOn(t, tc.source, nil)
			holding := func(when string, want bool) {
				t.Helper()
				st, err := engine.Inspect(b.ctx, b.log, b.id)
				if err != nil {
					t.Fatal(err)
				}
				if got := !st.Loops["start#1"].HoldUntil.IsZero(); got != want {
					t.Fatalf("%s: loop holding %v (hold_until %v), want %v", when, got, st.Loops["start#1"].HoldUntil, want)
				}
			}
			// loseNext loses the next frame's first attempt and returns
			// its second.
			loseNext := func() *engine.Command {
				t.Helper()
				lost := b.latest(t)
				b.crashOnTake(t, lost)
				b.clk.Advance(untakenLapse)
				cmd := b.latest(t)
				if want := strings.TrimSuffix(lost.ID, "@1") + "@2"; cmd.ID != want {
					t.Fatalf("after %s expired: %s issued, want %s", lost.ID, cmd.ID, want)
				}
				return cmd
			}
			again := loseNext()
			holding("after a loss before any frame finished", true)
			if err := b.e.Worker().Execute(b.ctx, again, b.e.Reporter()); err != nil {
				t.Fatal(err)
			}
			b.settle()
			holding("after a frame finished", !tc.exclusive)
			again = loseNext()
			holding("after a loss once a frame had finished", !tc.exclusive)
			holds := 0
			sum := b.runEach(t, again, runHeld(&holds))
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", sum.Status, sum.Error)
			}
			if holds != tc.holds {
				t.Errorf("%d frames held, want %d", holds, tc.holds)
			}
			if st := b.statuses(t); st["done"] != 6 {
				t.Fatalf("job statuses %v, want the 6 rows done", st)
			}
			b.mu.Lock()
			if len(b.ran) != 6 {
				t.Errorf("%d rows ran, want 6", len(b.ran))
			}
			for id, n := range b.ran {
				if n != 1 {
					t.Errorf("row %s ran %d times, want once", id, n)
				}
			}
			b.mu.Unlock()
			// What ended the drain is on record: a replay decides alike.
			drained := 0
			for _, ev := range b.events(t) {
				if ev.Type != eventlog.TypeFrameDone {
					continue
				}
				if got := strings.Contains(string(ev.Payload), `"exclusive":true`); got != tc.exclusive {
					t.Errorf("frame.done %s: exclusive %v, want %v", ev.Payload, got, tc.exclusive)
				}
				if strings.Contains(string(ev.Payload), `"drained":true`) {
					drained++
				}
			}
			if drained != 1+tc.holds {
				t.Errorf("%d frames found the source empty, want %d", drained, 1+tc.holds)
			}
			if _, err := engine.Fold(b.id, b.events(t)); err != nil {
				t.Fatalf("the history does not fold: %v", err)
			}
		})
	}
}
