package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/faultlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// Chained frames: a worker that ran a frame claims its slot's next rows
// before reporting, and the frame.done carries them (ChainReporter). These
// tests run the engine's own in-process workers, which chain, on a real
// PostgreSQL queue drained with the natural claim.

// chainBench is a queue of n rows and an engine with in-process workers
// over log.
type chainBench struct {
	*claimBench
}

func newChainBench(t *testing.T, n int, log eventlog.Log) *chainBench {
	t.Helper()
	pool, table, cfg := chainQueue(t, n, log)
	cfg.Workers = 8
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return &chainBench{&claimBench{pool: pool, table: table, log: log, eng: e}}
}

// chainQueue is a PostgreSQL queue of n rows and the engine configuration
// (log, the standard tools and cursors, a 10 ms tick) that drains it.
func chainQueue(t *testing.T, n int, log eventlog.Log) (*pgxpool.Pool, string, engine.Config) {
	t.Helper()
	dsn := testenv.Postgres(t)
	pool, table := pgQueue(t, dsn, n)
	kc := tools.StaticURLs(map[string]string{"pg": dsn, "pgq": dsn})
	treg, creg, closer := stdwire.Registries(kc, nil, false)
	t.Cleanup(func() { _ = closer.Close() })
	return pool, table, engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Tick: 10 * time.Millisecond}
}

// chained reports, for each frame.claimed in batches, whether it was
// recorded with the frame.done of the same slot's frame before it, after
// the command.issued of its own command, in the same append.
func chained(batches [][]eventlog.Event) (chainedN, alone int) {
	for _, b := range batches {
		for i, ev := range b {
			if ev.Type != eventlog.TypeFrameClaimed {
				continue
			}
			issued := slices.IndexFunc(b[:i], func(x eventlog.Event) bool {
				return x.Type == eventlog.TypeCommandIssued && x.CommandID == ev.CommandID
			})
			done := slices.IndexFunc(b[:max(issued, 0)], func(x eventlog.Event) bool {
				return x.Type == eventlog.TypeFrameDone && x.LoopID == ev.LoopID && x.Frame == ev.Frame-1 &&
					slotOf(x.CommandID) == slotOf(ev.CommandID)
			})
			if issued >= 0 && done >= 0 {
				chainedN++
			} else {
				alone++
			}
		}
	}
	return chainedN, alone
}

// slotOf is the "sN" of a frame command id "run/sN.fM@attempt".
func slotOf(id string) string {
	_, rest, _ := strings.Cut(id, "/")
	slot, _, _ := strings.Cut(rest, ".")
	return slot
}

// TestChainedFramesShareTheirAppend: in a clean drain every frame after a
// slot's first has its claim recorded in the append of the frame before
// (one append per frame on the slot's path, not two), every row runs
// exactly once, none is left claimed, and loop.done is recorded once.
func TestChainedFramesShareTheirAppend(t *testing.T) {
	const n, slots = 3000, 4
	log := logtest.NewRecorder(eventlog.NewMemory())
	b := newChainBench(t, n, log)
	sum, evs := b.run(t, withMaxInFlight(b.playbook("", "max_rows: 50", ""), slots))
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	counts, maxRuns := b.counts(t)
	if counts["done"] != n || maxRuns != 1 {
		t.Fatalf("statuses %v (most runs %d): want all %d done exactly once", counts, maxRuns, n)
	}
	loopDone := 0
	for _, ev := range evs {
		if ev.Type == eventlog.TypeLoopDone {
			loopDone++
		}
	}
	ch, alone := chained(log.Batches())
	// n/50 frames with rows; each slot's first claims alone.
	if loopDone != 1 || alone != slots || ch != n/50-slots {
		t.Fatalf("loop.done %d times; %d claims chained, %d alone: want 1, %d and %d", loopDone, ch, alone, n/50-slots, slots)
	}
}

// TestChainBound: a worker with MaxChain 3 reports every fourth frame of a
// slot alone, so that frame goes through the dispatcher again (where
// another worker may take it): no slot chains more than 3 frames in a row.
func TestChainBound(t *testing.T) {
	const n, slots = 2000, 2
	log := logtest.NewRecorder(eventlog.NewMemory())
	b := newChainBench(t, n, log)
	b.eng.Worker().MaxChain = 3
	sum, _ := b.run(t, withMaxInFlight(b.playbook("", "max_rows: 20", ""), slots))
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if counts, maxRuns := b.counts(t); counts["done"] != n || maxRuns != 1 {
		t.Fatalf("statuses %v (most runs %d): want all %d done exactly once", counts, maxRuns, n)
	}
	run := map[string]int{} // slot → chained claims in a row
	longest, alone := 0, 0
	for _, batch := range log.Batches() {
		ch, al := chained([][]eventlog.Event{batch})
		for _, ev := range batch {
			if ev.Type != eventlog.TypeFrameClaimed {
				continue
			}
			if ch > 0 && al == 0 {
				run[slotOf(ev.CommandID)]++
			} else {
				run[slotOf(ev.CommandID)] = 0
				alone++
			}
			longest = max(longest, run[slotOf(ev.CommandID)])
		}
	}
	if longest != 3 || alone < n/20/4 {
		t.Fatalf("longest chain %d, %d claims alone: want 3 and at least %d", longest, alone, n/20/4)
	}
}

// withMaxInFlight sets the loop's max_in_flight in a claimBench playbook.
func withMaxInFlight(src string, n int) string {
	const at = "        mode: cursor\n"
	return strings.Replace(src, at, at+fmt.Sprintf("        max_in_flight: %d\n", n), 1)
}

// chainedClaim matches the appends that record a chained claim: a
// frame.done followed by a frame.claimed.
var chainedClaim = faultlog.AppendsInOrder(eventlog.TypeFrameDone, eventlog.TypeFrameClaimed)

// TestChainedAppendFailureGivesTheClaimBack: the appends that would record
// a chained claim fail. The worker holds the rows it claimed ahead and
// sends its chained report again until it is recorded: the drain
// completes with every row run exactly once and none claimed.
func TestChainedAppendFailureGivesTheClaimBack(t *testing.T) {
	const n = 1000
	fl := faultlog.New(eventlog.NewMemory())
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 3, Match: chainedClaim})
	b := newChainBench(t, n, fl)
	sum, _ := b.run(t, withMaxInFlight(b.playbook("", "max_rows: 25", ""), 3))
	if sum.Status != engine.StatusCompleted || fl.Hits(faultlog.OpAppend) != 3 {
		t.Fatalf("status %s after %d injected failures: %s", sum.Status, fl.Hits(faultlog.OpAppend), sum.Error)
	}
	counts, maxRuns := b.counts(t)
	if counts["done"] != n || maxRuns != 1 {
		t.Fatalf("statuses %v (most runs %d): want all %d done exactly once", counts, maxRuns, n)
	}
}

// TestChainedAppendStoredButReportedFailed: the append of a chained
// claim stores it but answers with an error (a connection dropped before
// the reply). The worker, holding the rows it claimed ahead, sends its
// report again; the reloaded execution finds it recorded and hands it the
// slot's next frame: that frame runs its first attempt at once, with the
// held rows. Before, the worker gave the rows back and the recorded frame
// waited out its lease (an hour here) with nobody running it.
func TestChainedAppendStoredButReportedFailed(t *testing.T) {
	const n = 200
	fl := faultlog.New(eventlog.NewMemory())
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, Match: chainedClaim, AfterCommit: true})
	b := newChainBench(t, n, fl)
	sum, evs := b.run(t, withMaxInFlight(b.playbook("", "max_rows: 25, lease_seconds: 3600", ""), 2))
	if sum.Status != engine.StatusCompleted || fl.Hits(faultlog.OpAppend) != 1 {
		t.Fatalf("status %s after %d injected failures: %s", sum.Status, fl.Hits(faultlog.OpAppend), sum.Error)
	}
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && ev.Attempt != 1 {
			t.Fatalf("%s issued again: a recorded frame was re-issued instead of run by the worker holding its rows", ev.CommandID)
		}
	}
	counts, maxRuns := b.counts(t)
	if counts["done"] != n || maxRuns != 1 {
		t.Fatalf("statuses %v (most runs %d): want all %d done exactly once", counts, maxRuns, n)
	}
}

// chainHook runs every command on the engine's worker runtime with a
// reporter that calls before (if set) ahead of the nth chained report and
// after once it is answered.
type chainHook struct {
	eng    *engine.Engine
	wg     sync.WaitGroup
	mu     sync.Mutex
	n, nth int
	before func(done eventlog.Event)
	after  func(done eventlog.Event, next *engine.Command)
	// around, if set, makes the nth chained report: forward sends it to
	// the engine (and may be called again, as a transport resends).
	around func(forward func() (*engine.Command, error)) (*engine.Command, error)
}

func (h *chainHook) Dispatch(cmd *engine.Command) {
	h.wg.Go(func() { _ = h.eng.Worker().Execute(context.Background(), cmd, h) })
}
func (h *chainHook) Durable() bool    { return false }
func (h *chainHook) Cancel(id string) { h.eng.Worker().Cancel(id) }
func (h *chainHook) Report(ctx context.Context, ev eventlog.Event) error {
	return h.eng.Reporter().Report(ctx, ev)
}
func (h *chainHook) Heartbeat(ctx context.Context, e, c string) error {
	return h.eng.Reporter().Heartbeat(ctx, e, c)
}

func (h *chainHook) MayChain() bool { return true }

func (h *chainHook) ReportChained(ctx context.Context, done eventlog.Event, claimed json.RawMessage) (*engine.Command, error) {
	h.mu.Lock()
	h.n++
	hit := h.n == h.nth
	h.mu.Unlock()
	if hit && h.before != nil {
		h.before(done)
	}
	forward := func() (*engine.Command, error) {
		return h.eng.Reporter().(engine.ChainReporter).ReportChained(ctx, done, claimed)
	}
	if hit && h.around != nil {
		return h.around(forward)
	}
	next, err := forward()
	if hit && h.after != nil {
		h.after(done, next)
	}
	return next, err
}

// TestChainedClaimGivenBackOnCancel: the execution is cancelled while a
// slot chains its frames. Before the chained report is folded: no next
// frame is issued, and the rows claimed ahead go back uncommitted. After
// it, before the next frame starts: that frame gives its rows back
// instead of running them. Either way nothing is left claimed, no row
// runs twice, and the frame reports that it stopped for the cancel.
func TestChainedClaimGivenBackOnCancel(t *testing.T) {
	for _, when := range []string{"before the record", "after the record"} {
		t.Run(when, func(t *testing.T) {
			const n = 300
			dsn := testenv.Postgres(t)
			pool, table := pgQueue(t, dsn, n)
			kc := tools.StaticURLs(map[string]string{"pg": dsn, "pgq": dsn})
			treg, creg, closer := stdwire.Registries(kc, nil, false)
			defer closer.Close()
			log := eventlog.NewMemory()
			h := &chainHook{nth: 3}
			e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Dispatcher: h, Tick: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			h.eng = e
			defer func() { _ = e.Close(); h.wg.Wait() }()
			cancel := func(done eventlog.Event) {
				if err := e.Cancel(context.Background(), done.ExecutionID); err != nil {
					t.Error(err)
				}
				// As the transport's announcement would.
				e.Worker().Cancel(done.ExecutionID)
			}
			var handed *engine.Command
			if when == "before the record" {
				h.before = cancel
			} else {
				h.after = func(done eventlog.Event, next *engine.Command) { handed = next; cancel(done) }
			}
			b := &claimBench{pool: pool, table: table, log: log, eng: e}
			sum, evs := b.run(t, b.playbook("", "max_rows: 10", ""))
			if sum.Status != engine.StatusCancelled {
				t.Fatalf("status %s, want cancelled", sum.Status)
			}
			counts, maxRuns := b.counts(t)
			// Frames 1-3 ran (the third report is the hook's); frame 4's
			// rows went back.
			if counts["claimed"] != 0 || counts["done"] != 30 || counts["pending"] != n-30 || maxRuns != 1 {
				t.Fatalf("statuses %v (most runs %d): want 30 done, the rest pending, none claimed, each run once", counts, maxRuns)
			}
			var claims, stopped int
			for _, ev := range evs {
				switch {
				case ev.Type == eventlog.TypeFrameClaimed:
					claims++
				case ev.Type == eventlog.TypeFrameDone && strings.Contains(string(ev.Payload), `"cancelled":true`):
					stopped++
				}
			}
			want := 3 // the chained claim of frame 4 is never recorded
			if when == "after the record" {
				want = 4
				if handed == nil || stopped != 1 {
					t.Fatalf("next command %v, %d frames stopped for the cancel: want the 4th handed over and stopped", handed, stopped)
				}
			}
			if claims != want {
				t.Fatalf("%d frame.claimed recorded, want %d", claims, want)
			}
		})
	}
}

// chainDrain drains a queue of n rows in slots frame slots through an
// engine whose third chained report goes through around, and checks that
// every row ran exactly once and none is left claimed. It returns the
// execution's events.
func chainDrain(t *testing.T, n, slots int, frame string, around func(forward func() (*engine.Command, error)) (*engine.Command, error)) []eventlog.Event {
	t.Helper()
	log := eventlog.NewMemory()
	pool, table, cfg := chainQueue(t, n, log)
	h := &chainHook{nth: 3, around: around}
	cfg.Dispatcher = h
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.eng = e
	t.Cleanup(func() { _ = e.Close(); h.wg.Wait() })
	b := &claimBench{pool: pool, table: table, log: log, eng: e}
	sum, evs := b.run(t, withMaxInFlight(b.playbook("", frame, ""), slots))
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	counts, maxRuns := b.counts(t)
	if counts["done"] != n || maxRuns != 1 {
		t.Fatalf("statuses %v (most runs %d): want all %d done exactly once", counts, maxRuns, n)
	}
	return evs
}

// TestChainedReportSentAgain: a transport that lost the answer to a
// chained report sends it again; the orchestrator, which recorded it the
// first time, answers with the same command, and the worker runs it.
func TestChainedReportSentAgain(t *testing.T) {
	var first, second *engine.Command
	evs := chainDrain(t, 200, 2, "max_rows: 10", func(forward func() (*engine.Command, error)) (*engine.Command, error) {
		var err error
		if first, err = forward(); err != nil || first == nil {
			t.Errorf("first send: %v, %v", first, err)
		}
		// The answer is lost; the transport sends the report again.
		second, err = forward()
		return second, err
	})
	if first == nil || second == nil || first.ID != second.ID {
		t.Fatalf("first answer %v, second %v: want the same command twice", first, second)
	}
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && ev.Attempt > 1 {
			t.Fatalf("%s re-issued: the resent report must not cost a re-issue", ev.CommandID)
		}
	}
}

// TestChainedAnswerLaterThanTheLease: the answer to a chained report takes
// longer than the frame lease. The next frame's command, on record with
// the rows the worker still holds uncommitted, is kept alive by the
// worker's heartbeats meanwhile, so it is not re-issued under it. The
// claim's transaction does not outlive its lease (PostgreSQL ends it idle
// after a lease), so its commit fails and the worker runs the recorded
// rows all the same. One slot: with two, the other slot could claim those
// rows once they went back, and run them too (at least once, as the
// engine documents), which this test does not look at.
func TestChainedAnswerLaterThanTheLease(t *testing.T) {
	evs := chainDrain(t, 100, 1, "max_rows: 10, lease_seconds: 1, heartbeat_seconds: 0.1", func(forward func() (*engine.Command, error)) (*engine.Command, error) {
		next, err := forward()
		time.Sleep(2 * time.Second) // a slow answer: twice the lease
		return next, err
	})
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && ev.Attempt > 1 {
			t.Fatalf("%s re-issued while its worker held its rows", ev.CommandID)
		}
	}
}

// TestChainedReportCopiesAtOnce: a transport that resent a chained report
// while it was cut off delivers the copies together. Every copy gets the
// command the first one got, whether the orchestrator folds it with the
// first (it answers the batch's first copy's command) or after it (the
// claim is on record): an ErrStale would have the worker roll back a
// claim the log records, and another slot claim and run its rows while
// the re-issued frame ran them too.
func TestChainedReportCopiesAtOnce(t *testing.T) {
	const copies = 16
	var answers [copies]*engine.Command
	var errs [copies]error
	chainDrain(t, 200, 2, "max_rows: 10", func(forward func() (*engine.Command, error)) (*engine.Command, error) {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range copies {
			wg.Go(func() {
				<-start
				answers[i], errs[i] = forward()
			})
		}
		close(start)
		wg.Wait()
		return answers[0], errs[0]
	})
	for i := range copies {
		if errs[i] != nil || answers[i] == nil || answers[i].ID != answers[0].ID {
			t.Fatalf("copy %d: %v, %v; want the command the first copy got (%v)", i, answers[i], errs[i], answers[0])
		}
	}
}

// TestDrainWhileAFrameRuns: the worker is told to stop (Engine.Shutdown,
// a natsjs worker's SIGTERM) while a frame of its runs, as happens when an
// operator stops a busy worker. The frame finishes its rows and reports
// alone: it claims no rows ahead for its slot, so the stopping worker
// takes no new rows into its grace period (the orchestrator's frames
// still drain the queue). The drain used to be read when the frame began,
// so a frame running at the stop chained the slot's next frame and ran it
// here too.
func TestDrainWhileAFrameRuns(t *testing.T) {
	const n = 30
	log := eventlog.NewMemory()
	pool, table, cfg := chainQueue(t, n, log)
	var calls atomic.Int64
	entered, release := make(chan struct{}), make(chan struct{})
	cfg.Tools.MustRegister("gate", tools.ToolFunc(func(ctx context.Context, call *tools.Call) (tools.Output, error) {
		if calls.Add(1) == 1 {
			// The first row holds its frame until the worker is draining.
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return tools.Output{}, ctx.Err()
			}
		}
		if _, err := pool.Exec(ctx, "UPDATE "+table+" SET status = 'done', done_count = done_count + 1 WHERE id = $1", call.Config["id"]); err != nil {
			return tools.Output{}, fmt.Errorf("mark done: %w", err)
		}
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	h := &chainHook{nth: -1}
	cfg.Dispatcher = h
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.eng = e
	t.Cleanup(func() { _ = e.Close(); h.wg.Wait() })
	go func() {
		select {
		case <-entered:
		case <-time.After(time.Minute):
			return // the run below fails on its own
		}
		e.Worker().Drain()
		close(release)
	}()
	b := &claimBench{pool: pool, table: table, log: log, eng: e}
	sum, _ := b.run(t, header+`
workload: {table: `+table+`}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pgq`+claimSQL+`
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 1
        frame: {max_rows: 10}
    tool:
      kind: gate
      id: "{{ iter.job.id }}"
`)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if counts, maxRuns := b.counts(t); counts["done"] != n || maxRuns != 1 {
		t.Fatalf("statuses %v (most runs %d): want all %d done once", counts, maxRuns, n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n != 0 {
		t.Fatalf("the worker, draining since its first frame's first row, sent %d chained reports, want none", h.n)
	}
}

// TestDrainedWorkerChainsNoFrames: a drained worker (one that is stopping:
// Engine.Shutdown, a natsjs worker's SIGTERM) finishes the frames it is
// given without claiming its slots' next rows ahead, so that it takes no
// new rows; the orchestrator's frames still drain the queue.
func TestDrainedWorkerChainsNoFrames(t *testing.T) {
	log := eventlog.NewMemory()
	pool, table, cfg := chainQueue(t, 100, log)
	h := &chainHook{nth: -1}
	cfg.Dispatcher = h
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.eng = e
	t.Cleanup(func() { _ = e.Close(); h.wg.Wait() })
	e.Worker().Drain()
	b := &claimBench{pool: pool, table: table, log: log, eng: e}
	sum, _ := b.run(t, withMaxInFlight(b.playbook("", "max_rows: 10", ""), 2))
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if counts, _ := b.counts(t); counts["done"] != 100 {
		t.Fatalf("statuses %v: want all 100 done", counts)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n != 0 {
		t.Fatalf("the drained worker sent %d chained reports, want none", h.n)
	}
}
