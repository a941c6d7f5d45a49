package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// killingDispatcher runs each command on its own goroutine through the
// engine's worker runtime, except that it "kills" the worker of one chosen
// frame right after that frame's body has run: the worker stops
// heartbeating and its frame.done is held back, as if the process died
// before reporting (died is closed then). When the reaper has re-issued
// the frame, the held report is delivered late, and must be refused.
type killingDispatcher struct {
	eng    *engine.Engine
	victim string // command id of the frame to kill

	lateErr   chan error
	reissued  chan struct{}
	reissueOn sync.Once
	died      chan struct{}
}

func (k *killingDispatcher) Dispatch(cmd *engine.Command) { go k.run(cmd) }
func (k *killingDispatcher) Durable() bool                { return false }
func (k *killingDispatcher) Cancel(id string)             { k.eng.Worker().Cancel(id) }

func (k *killingDispatcher) run(cmd *engine.Command) {
	// Every command gets the dying reporter: the victim may come chained
	// to the frame before it rather than dispatched.
	_ = k.eng.Worker().Execute(context.Background(), cmd, &dyingReporter{k: k, inner: k.eng.Reporter().(engine.ChainReporter)})
}

// observe watches the log for the victim's re-issue.
func (k *killingDispatcher) observe(ev eventlog.Event) {
	base := k.victim[:strings.LastIndexByte(k.victim, '@')]
	if ev.Type == eventlog.TypeCommandIssued && ev.Attempt == 2 && strings.HasPrefix(ev.CommandID, base+"@") {
		k.reissueOn.Do(func() { close(k.reissued) })
	}
}

type dyingReporter struct {
	k     *killingDispatcher
	inner engine.ChainReporter
}

func (d *dyingReporter) Report(ctx context.Context, ev eventlog.Event) error {
	if ev.Type != eventlog.TypeFrameDone || ev.CommandID != d.k.victim {
		return d.inner.Report(ctx, ev)
	}
	d.die(ev)
	return nil
}

func (d *dyingReporter) MayChain() bool { return d.inner.MayChain() }

// ReportChained dies as Report does on the victim's frame.done: the claim
// made ahead is given back, as a dead process's transaction rolls back.
func (d *dyingReporter) ReportChained(ctx context.Context, done eventlog.Event, claimed json.RawMessage) (*engine.Command, error) {
	if done.CommandID != d.k.victim {
		return d.inner.ReportChained(ctx, done, claimed)
	}
	d.die(done)
	return nil, nil
}

// die holds the victim's report back and delivers it after the re-issue.
func (d *dyingReporter) die(ev eventlog.Event) {
	close(d.k.died)
	go func() {
		<-d.k.reissued
		d.k.lateErr <- d.inner.Report(context.Background(), ev)
	}()
}

func (d *dyingReporter) Heartbeat(ctx context.Context, executionID, commandID string) error {
	if commandID == d.k.victim {
		return nil // dead
	}
	return d.inner.Heartbeat(ctx, executionID, commandID)
}

// killingEngine is an engine on a memory log and a fake clock whose
// commands run through a killingDispatcher that kills victim, with the
// keychain alias pg for dsn; the test's cleanup closes it.
func killingEngine(t *testing.T, dsn, victim string) (*killingDispatcher, *engine.Engine, eventlog.Log, *clock.Fake) {
	t.Helper()
	kc := tools.StaticURLs(map[string]string{"pg": dsn})
	treg, creg, closer := stdwire.Registries(kc, nil, false)
	t.Cleanup(func() { _ = closer.Close() })
	kd := &killingDispatcher{victim: victim, lateErr: make(chan error, 1), reissued: make(chan struct{}), died: make(chan struct{})}
	log := eventlog.NewMemory()
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Dispatcher: kd, Clock: clk,
		Tick: 20 * time.Millisecond, Observer: engine.ObserverFunc(kd.observe)})
	if err != nil {
		t.Fatal(err)
	}
	kd.eng = e
	t.Cleanup(func() { _ = e.Close() })
	return kd, e, log, clk
}

// TestWorkerKilledMidFrame: the worker of one frame dies after running
// its rows, before reporting. On the fake clock, once every other slot has
// drained and only the dead frame is in flight, time moves past its lease:
// the frame is re-issued (exactly once) with its recorded rows, the dead
// worker's late report is refused, and every row is done exactly once.
func TestWorkerKilledMidFrame(t *testing.T) {
	dsn := testenv.Postgres(t)
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	pool, table := pgQueue(t, dsn, n)
	kd, e, log, clk := killingEngine(t, dsn, "start#1/s3.f2@1")
	src := header + `
workload: {table: ` + table + `}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg` + claimSQL + `
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 8
        frame: {max_rows: 500, process: frame, lease_seconds: 2}
    tool:
      kind: postgres
      auth: pg
      command: |
        UPDATE {{ table }} q SET status = 'done', result = r.payload * 2, done_count = q.done_count + 1
        FROM jsonb_to_recordset({{ iter.job | tojson | sql_literal }}::jsonb) AS r(id int, payload int)
        WHERE q.id = r.id AND q.status = 'claimed'
`
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id, err := e.Start(ctx, []byte(src), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-kd.died:
	case <-ctx.Done():
		t.Fatal("the victim frame never ran")
	}
	// No time passes while the other slots drain: nothing else can expire.
	for {
		st, err := engine.Inspect(ctx, log, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.InFlight) == 1 && st.InFlight[0] == kd.victim {
			break
		}
		if st.Status != engine.StatusRunning {
			t.Fatalf("execution ended %s with the victim's report held back", st.Status)
		}
		if err := log.Wait(ctx, id, st.LastSeq); err != nil {
			t.Fatalf("waiting for the other slots to drain: %v (in flight %v)", err, st.InFlight)
		}
	}
	clk.Advance(2*time.Second + time.Millisecond) // past lease_seconds
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := log.Read(ctx, id, 0, 0)
	if sum.Status != engine.StatusCompleted {
		dumpOnFail(t, evs)
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	select {
	case err := <-kd.lateErr:
		if !errors.Is(err, engine.ErrStale) {
			t.Fatalf("the dead worker's late frame.done was answered %v, want ErrStale", err)
		}
	case <-ctx.Done():
		t.Fatal("the victim frame was never re-issued")
	}
	var done, claimed, maxDone int
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE status = 'done' AND result = payload * 2),
		count(*) FILTER (WHERE status = 'claimed'), max(done_count) FROM %s`, table)).Scan(&done, &claimed, &maxDone); err != nil {
		t.Fatal(err)
	}
	if done != n || claimed != 0 || maxDone != 1 {
		t.Fatalf("done=%d claimed=%d max done_count=%d, want %d, 0, 1", done, claimed, maxDone, n)
	}
	if c := logtest.CountType(evs, eventlog.TypeLoopDone); c != 1 {
		t.Fatalf("loop.done recorded %d times", c)
	}
	leases := 0
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && strings.Contains(string(ev.Payload), `"reason":"lease"`) {
			leases++
		}
		if ev.Type == eventlog.TypeFrameDone && ev.CommandID == kd.victim {
			t.Fatalf("the dead worker's frame.done was recorded")
		}
	}
	if leases != 1 {
		t.Fatalf("%d frames re-issued after a lease expired, want 1", leases)
	}
	t.Logf("%d rows, %d events (%.4f per row)", n, len(evs), float64(len(evs))/float64(n))
}

// TestWorkerKilledAfterClaimCountsBuriedRows: the claim of the killed
// frame sets three rows aside (past max_attempts, through the cursor's
// dead_letter statement, committed with the claim), then the worker dies
// before reporting. The re-issued frame reports them dead as the lost
// attempt would have: the loop counts as dead exactly the rows the table
// holds dead. Before, the rows set aside were known only to the dead
// worker: the loop finished with them counted nowhere.
func TestWorkerKilledAfterClaimCountsBuriedRows(t *testing.T) {
	dsn := testenv.Postgres(t)
	const n, poison = 20, 3
	pool, table := pgQueue(t, dsn, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Rows 1-3 failed five times already.
	if _, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %s SET attempts = 5 WHERE id <= %d`, table, poison)); err != nil {
		t.Fatal(err)
	}
	kd, e, log, clk := killingEngine(t, dsn, "start#1/s0.f1@1")
	src := header + `
workload: {table: ` + table + `}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          UPDATE {{ table }} SET status = 'running', attempts = attempts + 1
           WHERE id IN (SELECT id FROM {{ table }} WHERE status = 'pending' ORDER BY id
                        FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
          RETURNING id, payload, attempts
        release: UPDATE {{ table }} SET status = 'pending' WHERE status = 'running' AND id IN ({{ keys | join(',') }})
        dead_letter: UPDATE {{ table }} SET status = 'dead' WHERE id IN ({{ keys | join(',') }})
        max_attempts: 3
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 1
        frame: {max_rows: 10, lease_seconds: 2}
    tool:
      kind: postgres
      auth: pg
      command: UPDATE {{ table }} SET status = 'done', done_count = done_count + 1 WHERE id = {{ iter.job.id }}
`
	id, err := e.Start(ctx, []byte(src), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-kd.died:
	case <-ctx.Done():
		t.Fatal("the victim frame never ran")
	}
	clk.Advance(2*time.Second + time.Millisecond) // past lease_seconds
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := log.Read(ctx, id, 0, 0)
	if sum.Status != engine.StatusCompleted {
		dumpOnFail(t, evs)
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if err := <-kd.lateErr; !errors.Is(err, engine.ErrStale) {
		t.Fatalf("the dead worker's late frame.done was answered %v, want ErrStale", err)
	}
	var done, dead, running int
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE status = 'done'),
		count(*) FILTER (WHERE status = 'dead'), count(*) FILTER (WHERE status = 'running') FROM %s`, table)).Scan(&done, &dead, &running); err != nil {
		t.Fatal(err)
	}
	if done != n-poison || dead != poison || running != 0 {
		t.Fatalf("table: done=%d dead=%d running=%d, want %d, %d, 0", done, dead, running, n-poison, poison)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	if l := st.Loops["start#1"]; l.OK != n-poison || l.Dead != poison || l.Failed != 0 {
		dumpOnFail(t, evs)
		t.Fatalf("loop counts ok=%d failed=%d dead=%d, want %d, 0, %d (the table's)", l.OK, l.Failed, l.Dead, n-poison, poison)
	}
}
