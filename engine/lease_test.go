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

	"github.com/jackc/pgx/v5/pgxpool"

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
	// second, when set, is killed too (secondDied is closed then), and
	// its report is never delivered.
	second     string
	secondDied chan struct{}

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
	if ev.Type != eventlog.TypeFrameDone || (ev.CommandID != d.k.victim && ev.CommandID != d.k.second) {
		return d.inner.Report(ctx, ev)
	}
	d.die(ev)
	return nil
}

func (d *dyingReporter) MayChain() bool { return d.inner.MayChain() }

// ReportChained dies as Report does on the victim's frame.done: the claim
// made ahead is given back, as a dead process's transaction rolls back.
func (d *dyingReporter) ReportChained(ctx context.Context, done eventlog.Event, claimed json.RawMessage) (*engine.Command, error) {
	if done.CommandID != d.k.victim && done.CommandID != d.k.second {
		return d.inner.ReportChained(ctx, done, claimed)
	}
	d.die(done)
	return nil, nil
}

// die holds the victim's report back and delivers it after the re-issue.
func (d *dyingReporter) die(ev eventlog.Event) {
	if ev.CommandID == d.k.second {
		close(d.k.secondDied)
		return
	}
	close(d.k.died)
	go func() {
		<-d.k.reissued
		d.k.lateErr <- d.inner.Report(context.Background(), ev)
	}()
}

func (d *dyingReporter) Heartbeat(ctx context.Context, executionID, commandID string) error {
	if commandID == d.k.second {
		select {
		case <-d.k.secondDied:
			return nil // dead
		default: // alive until it reports: the engine knows it took the attempt
		}
	}
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
	kd := &killingDispatcher{victim: victim, lateErr: make(chan error, 1), reissued: make(chan struct{}), died: make(chan struct{}),
		secondDied: make(chan struct{})}
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
// drained and only the dead frame is in flight, time moves past three of
// its heartbeats (not its whole lease: it was chained, so its worker held
// it from the start): the frame is re-issued (exactly once) with its
// recorded rows, the dead worker's late report is refused, and every row
// is done exactly once.
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
	// The victim is its slot's second frame, chained to the first: its
	// worker held it from the start, so missing three heartbeats (a
	// tenth of lease_seconds each) is enough, well inside the lease.
	clk.Advance(700 * time.Millisecond)
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
// before reporting. The frame's next attempt reports them dead as the
// lost attempt would have: the loop counts as dead exactly the rows the
// table holds dead. Before, the rows set aside were known only to the
// dead worker: the loop finished with them counted nowhere. The next
// attempt is a re-issue of the frame with its rows (the frame may be
// lost three times), or, when the frame may be lost only once
// (frame.max_attempts: 1), the attempt that dead-letters its rows.
func TestWorkerKilledAfterClaimCountsBuriedRows(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, tc := range []struct {
		name, frame string
		wantDead    int
	}{
		{"reissued", "{max_rows: 10, lease_seconds: 2}", buriedPoison},
		// The killed frame's other seven rows go to the dead letter too.
		{"dead-lettered", "{max_rows: 10, lease_seconds: 2, max_attempts: 1}", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pool, table := buriedQueue(t, ctx, dsn)
			kd, e, log, clk := killingEngine(t, dsn, "start#1/s0.f1@1")
			id, err := e.Start(ctx, []byte(buriedPlaybook(table, tc.frame)), engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-kd.died:
			case <-ctx.Done():
				t.Fatal("the victim frame never ran")
			}
			clk.Advance(2*time.Second + time.Millisecond) // past lease_seconds
			checkBuriedCounted(t, ctx, e, log, pool, table, id, tc.wantDead)
			if err := <-kd.lateErr; !errors.Is(err, engine.ErrStale) {
				t.Fatalf("the dead worker's late frame.done was answered %v, want ErrStale", err)
			}
		})
	}
}

// TestDeadLetterAttemptLostCountsBuriedRows: as above, with the frame
// allowed to be lost once; then the attempt that dead-letters its rows is
// lost too (its worker dies after the source took the dead letter). The
// engine gives up on the rows: the frame.done it records lists the rows
// abandoned, and the rows the first claim set aside dead, so the loop
// still counts as dead the rows the table holds dead.
func TestDeadLetterAttemptLostCountsBuriedRows(t *testing.T) {
	dsn := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, table := buriedQueue(t, ctx, dsn)
	kd, e, log, clk := killingEngine(t, dsn, "start#1/s0.f1@1")
	kd.second = "start#1/s0.f1@2"
	id, err := e.Start(ctx, []byte(buriedPlaybook(table, "{max_rows: 10, lease_seconds: 2, max_attempts: 1}")), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, died := range []chan struct{}{kd.died, kd.secondDied} {
		select {
		case <-died:
		case <-ctx.Done():
			t.Fatal("a victim never ran")
		}
		clk.Advance(2*time.Second + time.Millisecond) // past lease_seconds
	}
	checkBuriedCounted(t, ctx, e, log, pool, table, id, 10)
	evs, _ := log.Read(ctx, id, 0, 0)
	abandoned := false
	for _, ev := range evs {
		abandoned = abandoned || ev.Type == eventlog.TypeFrameDone && ev.CommandID == kd.second &&
			strings.Contains(string(ev.Payload), "the dead-letter attempt was lost") && strings.Contains(string(ev.Payload), `"abandoned"`)
	}
	if !abandoned {
		t.Error("no frame.done of the lost dead-letter attempt lists its rows abandoned")
		dumpOnFail(t, evs)
	}
}

// buriedPoison is how many rows of buriedQueue have failed past the
// cursor's max_attempts: the first claim sets them aside.
const buriedPoison = 3

// buriedQueue is a 20-row queue whose first buriedPoison rows failed
// five times already.
func buriedQueue(t *testing.T, ctx context.Context, dsn string) (*pgxpool.Pool, string) {
	t.Helper()
	pool, table := pgQueue(t, dsn, 20)
	if _, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %s SET attempts = 5 WHERE id <= %d`, table, buriedPoison)); err != nil {
		t.Fatal(err)
	}
	return pool, table
}

// buriedPlaybook drains table one frame at a time with frame spec frame,
// setting aside rows delivered more than three times (dead_letter).
func buriedPlaybook(table, frame string) string {
	return header + `
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
        frame: ` + frame + `
    tool:
      kind: postgres
      auth: pg
      command: UPDATE {{ table }} SET status = 'done', done_count = done_count + 1 WHERE id = {{ iter.job.id }}
`
}

// checkBuriedCounted waits for execution id to complete and checks that
// the table holds wantDead rows dead and the others done, and that the
// loop counts them so.
func checkBuriedCounted(t *testing.T, ctx context.Context, e *engine.Engine, log eventlog.Log, pool *pgxpool.Pool, table, id string, wantDead int) {
	t.Helper()
	const n = 20
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := log.Read(ctx, id, 0, 0)
	if sum.Status != engine.StatusCompleted {
		dumpOnFail(t, evs)
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	var done, dead, running int
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE status = 'done'),
		count(*) FILTER (WHERE status = 'dead'), count(*) FILTER (WHERE status = 'running') FROM %s`, table)).Scan(&done, &dead, &running); err != nil {
		t.Fatal(err)
	}
	if done != n-wantDead || dead != wantDead || running != 0 {
		t.Fatalf("table: done=%d dead=%d running=%d, want %d, %d, 0", done, dead, running, n-wantDead, wantDead)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	if l := st.Loops["start#1"]; l.OK != n-wantDead || l.Dead != wantDead || l.Failed != 0 {
		dumpOnFail(t, evs)
		t.Fatalf("loop counts ok=%d failed=%d dead=%d, want %d, 0, %d (the table's)", l.OK, l.Failed, l.Dead, n-wantDead, wantDead)
	}
}
