package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
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

// hookDispatcher runs each command on its own goroutine through the
// engine's worker, after asking hook what to do with it: run it with the
// reporter hook returns, or (nil reporter) drop it as if its worker died
// on receipt.
type hookDispatcher struct {
	eng  *engine.Engine
	hook func(ctx context.Context, cancel context.CancelFunc, cmd *engine.Command, rep engine.Reporter) engine.Reporter
	wg   sync.WaitGroup
	// root ends every command's context when the test is over.
	root context.Context
}

func (d *hookDispatcher) Dispatch(cmd *engine.Command) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		ctx, cancel := context.WithCancel(d.root)
		defer cancel()
		// The hooks inject faults at a frame's own reports, so frames here
		// claim one at a time: the engine reporter is offered without
		// ReportChained (chain_test.go injects faults into chained frames).
		rep := d.hook(ctx, cancel, cmd, reporterFunc{inner: d.eng.Reporter(), report: d.eng.Reporter().Report})
		if rep == nil {
			return
		}
		_ = d.eng.Worker().Execute(ctx, cmd, rep)
	}()
}
func (d *hookDispatcher) Durable() bool             { return false }
func (d *hookDispatcher) Cancel(executionID string) { d.eng.Worker().Cancel(executionID) }

// reporterFunc is a Reporter whose Report is a function of the inner one.
type reporterFunc struct {
	inner  engine.Reporter
	report func(ctx context.Context, ev eventlog.Event) error
}

func (r reporterFunc) Report(ctx context.Context, ev eventlog.Event) error { return r.report(ctx, ev) }
func (r reporterFunc) Heartbeat(ctx context.Context, e, c string) error {
	return r.inner.Heartbeat(ctx, e, c)
}

// claimBench is a postgres queue, an engine whose commands go through a
// hookDispatcher, and the keychain aliases pg (the body's connection) and
// pgq (the cursor's, with its own application_name so a test can kill
// exactly the cursor's backends).
type claimBench struct {
	pool  *pgxpool.Pool
	table string
	app   string
	log   eventlog.Log
	eng   *engine.Engine
	d     *hookDispatcher
}

func newClaimBench(t *testing.T, n int, hook func(ctx context.Context, cancel context.CancelFunc, cmd *engine.Command, rep engine.Reporter) engine.Reporter) *claimBench {
	t.Helper()
	dsn := testenv.Postgres(t)
	pool, table := pgQueue(t, dsn, n)
	app := "cfq_" + table
	kc := tools.StaticURLs(map[string]string{"pg": dsn, "pgq": testenv.WithAppName(dsn, app)})
	treg, creg, closer := stdwire.Registries(kc, nil, false)
	t.Cleanup(func() { _ = closer.Close() })
	root, stop := context.WithCancel(context.Background())
	b := &claimBench{pool: pool, table: table, app: app, log: eventlog.NewMemory(), d: &hookDispatcher{hook: hook, root: root}}
	var err error
	b.eng, err = engine.New(engine.Config{Log: b.log, Tools: treg, Cursors: creg, Keychain: kc, Dispatcher: b.d, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.d.eng = b.eng
	t.Cleanup(func() {
		_ = b.eng.Close()
		stop()
		b.d.wg.Wait()
	})
	return b
}

// playbook is a drain of the bench's table: the natural claim of the
// cursor-loop design (no reclaim clause, no slot tag) and one UPDATE per
// row. cursorExtra and frame are spliced into the cursor and frame blocks.
func (b *claimBench) playbook(cursorExtra, frame, body string) string {
	if body == "" {
		body = `UPDATE {{ table }} SET status = 'done', result = {{ iter.job.payload }} * 2, done_count = done_count + 1 WHERE id = {{ iter.job.id }}`
	}
	return header + `
workload: {table: ` + b.table + `}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pgq` + claimSQL + cursorExtra + `
      iterator: job
      spec:
        mode: cursor
        frame: {` + frame + `}
    tool:
      kind: postgres
      auth: pg
      command: "` + body + `"
`
}

func (b *claimBench) run(t *testing.T, src string) (*engine.Summary, []eventlog.Event) {
	t.Helper()
	sum, evs := runPlaybook(t, b.eng, b.log, src, engine.StartOptions{File: "claim.yaml"}, time.Minute)
	t.Cleanup(func() { dumpOnFail(t, evs) })
	return sum, evs
}

// counts returns how many rows have each status, and the most times a
// row's body ran.
func (b *claimBench) counts(t *testing.T) (map[string]int, int) {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), "SELECT status, count(*), max(done_count) FROM "+b.table+" GROUP BY status")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	maxRuns := 0
	for rows.Next() {
		var s string
		var n, m int
		if err := rows.Scan(&s, &n, &m); err != nil {
			t.Fatal(err)
		}
		out[s] = n
		maxRuns = max(maxRuns, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out, maxRuns
}

// killCursorBackends terminates the cursor's connections, as a network
// cut or a server restart would.
func (b *claimBench) killCursorBackends(ctx context.Context) (int, error) {
	var n int
	err := b.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, b.app).Scan(&n)
	return n, err
}

// TestClaimAbortedWhenTheRecordFails: a frame whose frame.claimed cannot
// be recorded aborts its claim, so its rows are claimable again at once;
// nothing stays claimed and no row runs twice.
func TestClaimAbortedWhenTheRecordFails(t *testing.T) {
	const n = 60
	var refused sync.Once
	refusedCh := make(chan struct{})
	b := newClaimBench(t, n, func(_ context.Context, _ context.CancelFunc, cmd *engine.Command, rep engine.Reporter) engine.Reporter {
		if cmd.ID != "start#1/s0.f1@1" {
			return rep
		}
		return reporterFunc{inner: rep, report: func(ctx context.Context, ev eventlog.Event) error {
			if ev.Type == eventlog.TypeFrameClaimed {
				refused.Do(func() { close(refusedCh) })
				return errors.New("event log unavailable")
			}
			return rep.Report(ctx, ev)
		}}
	})
	sum, evs := b.run(t, b.playbook("", "max_rows: 10, lease_seconds: 0.5", ""))
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	select {
	case <-refusedCh:
	default:
		t.Fatal("the fault never fired: no frame.claimed was refused")
	}
	counts, maxRuns := b.counts(t)
	if counts["done"] != n || counts["claimed"] != 0 || maxRuns != 1 {
		t.Fatalf("statuses %v, most runs of a row %d; want %d done, none claimed, each run once", counts, maxRuns, n)
	}
	if c := logtest.CountType(evs, eventlog.TypeLoopDone); c != 1 {
		t.Fatalf("loop.done recorded %d times", c)
	}
}

// TestCommitFailureAfterTheRecordRunsTheRows: the claim's COMMIT fails
// after frame.claimed is recorded (the cursor's connection is cut): the
// rows are on record, so the frame runs them all the same.
func TestCommitFailureAfterTheRecordRunsTheRows(t *testing.T) {
	const n = 30
	var b *claimBench
	killed := make(chan int, 1)
	b = newClaimBench(t, n, func(_ context.Context, _ context.CancelFunc, cmd *engine.Command, rep engine.Reporter) engine.Reporter {
		if cmd.ID != "start#1/s0.f1@1" {
			return rep
		}
		return reporterFunc{inner: rep, report: func(ctx context.Context, ev eventlog.Event) error {
			err := rep.Report(ctx, ev)
			if ev.Type == eventlog.TypeFrameClaimed && err == nil {
				k, kerr := b.killCursorBackends(ctx)
				if kerr != nil {
					t.Error(kerr)
				}
				killed <- k
			}
			return err
		}}
	})
	sum, evs := b.run(t, b.playbook("", "max_rows: 10", ""))
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	select {
	case k := <-killed:
		if k != 1 {
			t.Fatalf("killed %d cursor backends at the commit, want the claim's 1", k)
		}
	default:
		t.Fatal("the fault never fired")
	}
	counts, maxRuns := b.counts(t)
	if counts["done"] != n || counts["claimed"] != 0 || maxRuns != 1 {
		t.Fatalf("statuses %v, most runs %d; want %d done, none claimed, each once", counts, maxRuns, n)
	}
	for _, ev := range evs {
		if ev.Type == eventlog.TypeFrameDone && ev.CommandID == "start#1/s0.f1@1" {
			var p struct {
				Counts struct{ OK int } `json:"counts"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil || p.Counts.OK != 10 {
				t.Fatalf("the frame whose commit failed reported %s, want its 10 rows ok", ev.Payload)
			}
			return
		}
	}
	t.Fatal("the frame whose commit failed reported no frame.done")
}

// crashAfterClaim makes the hook of a frame's attempt behave like a
// worker process that died right after its claim committed: the command's
// context ends as the record returns, so nothing of the body succeeds,
// and no heartbeat or report follows.
func crashAfterClaim(ctx context.Context, cancel context.CancelFunc, rep engine.Reporter) engine.Reporter {
	return reporterFunc{inner: rep, report: func(rctx context.Context, ev eventlog.Event) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err := rep.Report(rctx, ev)
		if ev.Type == eventlog.TypeFrameClaimed {
			cancel()
		}
		return err
	}}
}

// TestFrameGivenUpIsDeadLettered: frame 1's worker dies after its claim
// in its first attempt, and as it takes each later one; after
// cursor.max_attempts expiries the engine issues
// an attempt that only dead-letters the recorded rows, so they reach the
// table's dead letter instead of staying claimed, and the loop counts
// them dead. When that attempt is lost too, the rows are recorded dead
// and listed as abandoned.
func TestFrameGivenUpIsDeadLettered(t *testing.T) {
	for _, loseSettle := range []bool{false, true} {
		t.Run(fmt.Sprintf("settle lost %v", loseSettle), func(t *testing.T) {
			const n, frame = 40, 10
			b := newClaimBench(t, n, func(ctx context.Context, cancel context.CancelFunc, cmd *engine.Command, rep engine.Reporter) engine.Reporter {
				if !strings.HasPrefix(cmd.ID, "start#1/s0.f1@") {
					return rep
				}
				switch {
				case cmd.Settle == engine.SettleDeadLetter && !loseSettle:
					return rep
				case cmd.Attempt == 1:
					return crashAfterClaim(ctx, cancel, rep)
				}
				// Takes it (its first heartbeat goes out) and dies at once:
				// a lost attempt that counts toward max_attempts.
				_ = rep.Heartbeat(ctx, cmd.ExecutionID, cmd.ID)
				return nil
			})
			deadLetter := `
        dead_letter: UPDATE {{ table }} SET status = 'dead' WHERE id IN ({{ keys | join(',') }})
        max_attempts: 2`
			sum, evs := b.run(t, b.playbook(deadLetter, "max_rows: 10, lease_seconds: 0.4", ""))
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", sum.Status, sum.Error)
			}
			counts, _ := b.counts(t)
			res := data(t, sum, "start")
			if res["dead"] != int64(frame) || res["ok"] != int64(n-frame) {
				t.Fatalf("loop result %v, want %d dead and %d ok", res, frame, n-frame)
			}
			var settles, abandoned int
			for _, ev := range evs {
				if ev.Type == eventlog.TypeCommandIssued && strings.Contains(string(ev.Payload), `"settle":"dead_letter"`) {
					settles++
				}
				if ev.Type == eventlog.TypeFrameDone && strings.Contains(string(ev.Payload), `"abandoned"`) {
					abandoned++
				}
			}
			if settles != 1 {
				t.Fatalf("%d dead-letter attempts issued, want 1", settles)
			}
			if !loseSettle {
				if counts["dead"] != frame || counts["done"] != n-frame || counts["claimed"] != 0 || abandoned != 0 {
					t.Fatalf("statuses %v (%d frames abandoned); want %d dead, %d done, none claimed", counts, abandoned, frame, n-frame)
				}
				return
			}
			// The dead-letter attempt died too: the engine records the rows
			// dead and says it abandoned them; the table still holds them.
			if abandoned != 1 || counts["claimed"] != frame || counts["done"] != n-frame {
				t.Fatalf("statuses %v, %d frames abandoned; want %d left claimed and 1 abandoned frame", counts, abandoned, frame)
			}
		})
	}
}

// settler returns a function that returns once e's orchestrator has run
// a full step after the clock moved or a report came in (two round trips
// through its inbox).
func settler(ctx context.Context, t *testing.T, e *engine.Engine) func() {
	return func() {
		t.Helper()
		for range 2 {
			if _, err := e.Driving(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// holdingDispatcher keeps the commands it is given and runs none: the
// test plays the worker.
type holdingDispatcher struct {
	mu   sync.Mutex
	cmds []*engine.Command
}

func (d *holdingDispatcher) Dispatch(cmd *engine.Command) {
	d.mu.Lock()
	d.cmds = append(d.cmds, cmd)
	d.mu.Unlock()
}
func (d *holdingDispatcher) Durable() bool { return false }
func (d *holdingDispatcher) Cancel(string) {}

func (d *holdingDispatcher) issued() []*engine.Command {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*engine.Command(nil), d.cmds...)
}

// TestReissueAfterMissedHeartbeats: once a command has heartbeated, it is
// re-issued after three silent heartbeat intervals rather than a whole
// lease; before its first heartbeat the whole lease applies. Frames beat
// at heartbeat_seconds, step commands at CommandLease/10. Templated frame
// seconds are rendered for the lease and the heartbeat alike (a rendered
// lease's heartbeat defaults to a tenth of it; reclaim_after caps it).
func TestReissueAfterMissedHeartbeats(t *testing.T) {
	for _, tc := range []struct {
		name, workload, workflow string
		lease, beat              time.Duration
	}{
		{"frame", "", `
  - step: start
    loop:
      cursor: {kind: postgres, auth: pg, claim: "SELECT 1"}
      iterator: r
      spec: {frame: {lease_seconds: 60, heartbeat_seconds: 2}}
    tool: {kind: noop}`, time.Minute, 2 * time.Second},
		{"step", "", `
  - step: start
    tool: {kind: noop}`, 30 * time.Second, 3 * time.Second},
		{"templated frame lease", "workload: {lease: 40}\n", `
  - step: start
    loop:
      cursor: {kind: postgres, auth: pg, claim: "SELECT 1"}
      iterator: r
      spec: {frame: {lease_seconds: "{{ lease }}"}}
    tool: {kind: noop}`, 40 * time.Second, 4 * time.Second},
		{"templated frame capped by reclaim_after", "workload: {lease: 40, beat: 1.5}\n", `
  - step: start
    loop:
      cursor: {kind: postgres, auth: pg, claim: "SELECT 1", reclaim_after: 20s}
      iterator: r
      spec: {frame: {lease_seconds: "{{ lease }}", heartbeat_seconds: "{{ beat }}"}}
    tool: {kind: noop}`, 20 * time.Second, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			d := &holdingDispatcher{}
			e, err := engine.New(engine.Config{Log: eventlog.NewMemory(), Dispatcher: d, Clock: clk,
				CommandLease: 30 * time.Second, Tick: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			id, err := e.Start(ctx, []byte(header+tc.workload+"workflow:"+tc.workflow+"\n"), engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			settle := settler(ctx, t, e)
			attempts := func() int {
				settle()
				return len(d.issued())
			}
			settle()
			cmds := d.issued()
			if len(cmds) != 1 || cmds[0].Lease != tc.lease || cmds[0].Heartbeat != tc.beat {
				t.Fatalf("issued %d commands, first %+v; want 1 with lease %v, heartbeat %v", len(cmds), cmds, tc.lease, tc.beat)
			}
			// Still queued (no heartbeat yet): the whole lease applies.
			clk.Advance(tc.lease - time.Second)
			if n := attempts(); n != 1 {
				t.Fatalf("re-issued before the lease ran out and before any heartbeat (%d commands)", n)
			}
			if err := e.Reporter().Heartbeat(ctx, id, cmds[0].ID); err != nil {
				t.Fatal(err)
			}
			settle()
			clk.Advance(3*tc.beat - 100*time.Millisecond)
			if n := attempts(); n != 1 {
				t.Fatalf("re-issued %v after a heartbeat, before three heartbeats were missed", 3*tc.beat-100*time.Millisecond)
			}
			clk.Advance(200 * time.Millisecond)
			if n := attempts(); n != 2 {
				t.Fatalf("not re-issued after three missed heartbeats (%d commands)", n)
			}
			cmds = d.issued()
			if cmds[1].Attempt != 2 {
				t.Fatalf("re-issue is attempt %d, want 2", cmds[1].Attempt)
			}
			// The dead attempt's late report is fenced off.
			late := eventlog.Event{ExecutionID: id, Type: eventlog.TypeCommandCompleted, Step: "start", CommandID: cmds[0].ID, Attempt: 1, Payload: []byte(`{}`)}
			if cmds[0].Kind == engine.KindFrame {
				late.Type, late.LoopID, late.Payload = eventlog.TypeFrameDone, cmds[0].Run, []byte(`{"counts":{}}`)
			}
			if err := e.Reporter().Report(ctx, late); !errors.Is(err, engine.ErrStale) {
				t.Fatalf("late report of the silent attempt: %v, want ErrStale", err)
			}
		})
	}
}

// pollCount polls a count query until it reaches want.
func pollCount(t *testing.T, ctx context.Context, pool *pgxpool.Pool, query string, want int) {
	t.Helper()
	for {
		var n int
		if err := pool.QueryRow(ctx, query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n >= want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s reached %d, want %d: %v", query, n, want, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestCancelStopsFramesBetweenRows cancels a drain while frames run: the
// workers stop between rows and hand the rows they have not started back
// (release), or, when the cursor has no release statement, finish the
// rows they hold; the execution ends cancelled with no row left claimed.
func TestCancelStopsFramesBetweenRows(t *testing.T) {
	for _, withRelease := range []bool{true, false} {
		t.Run(fmt.Sprintf("release %v", withRelease), func(t *testing.T) {
			const n = 400
			b := newClaimBench(t, n, func(_ context.Context, _ context.CancelFunc, _ *engine.Command, rep engine.Reporter) engine.Reporter {
				return rep
			})
			release := ""
			if withRelease {
				release = `
        release: UPDATE {{ table }} SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})`
			}
			body := `SELECT pg_sleep(0.01); UPDATE {{ table }} SET status = 'done', done_count = done_count + 1 WHERE id = {{ iter.job.id }}`
			src := strings.Replace(b.playbook(release, "max_rows: 25", body), "mode: cursor", "mode: cursor\n        max_in_flight: 2", 1)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			id, err := b.eng.Start(ctx, []byte(src), engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pollCount(t, ctx, b.pool, "SELECT count(*) FROM "+b.table+" WHERE status = 'done'", 30)
			if err := b.eng.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
			sum, err := b.eng.Wait(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := b.log.Read(ctx, id, 0, 0)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCancelled {
				t.Fatalf("status %s, want cancelled", sum.Status)
			}
			counts, maxRuns := b.counts(t)
			if counts["claimed"] != 0 || counts["done"]+counts["pending"] != n || counts["done"] == n || maxRuns > 1 {
				t.Fatalf("statuses %v (most runs %d): want none claimed, the drain stopped short of %d, each row run at most once", counts, maxRuns, n)
			}
			var stopped int
			for _, ev := range evs {
				if ev.Type == eventlog.TypeFrameDone && strings.Contains(string(ev.Payload), `"cancelled":true`) {
					stopped++
				}
			}
			if withRelease && stopped == 0 {
				t.Fatal("no frame reported that it stopped for the cancel")
			}
			if !withRelease && stopped != 0 {
				t.Fatalf("%d frames stopped early although the cursor cannot take rows back", stopped)
			}
		})
	}
}

// TestCancelSettlesAVanishedFrame: a frame whose worker died after its
// claim committed, while the execution is being cancelled, gets one
// attempt that only releases its recorded rows (or runs them, where the
// cursor cannot take them back); nothing is left claimed.
func TestCancelSettlesAVanishedFrame(t *testing.T) {
	for _, withRelease := range []bool{true, false} {
		t.Run(fmt.Sprintf("release %v", withRelease), func(t *testing.T) {
			const n = 30
			var b *claimBench
			b = newClaimBench(t, n, func(ctx context.Context, cancel context.CancelFunc, cmd *engine.Command, rep engine.Reporter) engine.Reporter {
				if cmd.ID != "start#1/s0.f2@1" {
					return rep
				}
				return reporterFunc{inner: rep, report: func(rctx context.Context, ev eventlog.Event) error {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					err := rep.Report(rctx, ev)
					if ev.Type == eventlog.TypeFrameClaimed {
						// The execution is cancelled and the worker dies.
						if cerr := b.eng.Cancel(rctx, ev.ExecutionID); cerr != nil {
							t.Error(cerr)
						}
						cancel()
					}
					return err
				}}
			})
			release := ""
			if withRelease {
				release = `
        release: UPDATE {{ table }} SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})`
			}
			sum, evs := b.run(t, b.playbook(release, "max_rows: 10, lease_seconds: 1", ""))
			if sum.Status != engine.StatusCancelled {
				t.Fatalf("status %s, want cancelled", sum.Status)
			}
			var settles int
			for _, ev := range evs {
				if ev.Type == eventlog.TypeCommandIssued && strings.Contains(string(ev.Payload), `"settle":"release"`) {
					settles++
				}
			}
			counts, maxRuns := b.counts(t)
			want := map[string]int{"done": 10, "pending": 20}
			if !withRelease {
				want = map[string]int{"done": 20, "pending": 10}
			}
			if settles != 1 || counts["claimed"] != 0 || counts["done"] != want["done"] || counts["pending"] != want["pending"] || maxRuns != 1 {
				t.Fatalf("%d release attempts, statuses %v (most runs %d); want 1 attempt and %v", settles, counts, maxRuns, want)
			}
		})
	}
}

// TestWorkerSlotIDInClaims: a claim that tags rows with NoETL's
// %(__worker_slot_id)s gets a per-slot id that is the same for every
// frame of the slot, differs between slots and between executions, and
// fits in 53 bits; __worker_slot_index is the slot's index.
//
// Each slot reports a frame.done only once the other slot has claimed: on
// a loaded machine either slot could otherwise drain the queue before the
// other's first claim, and there would be no second slot's id to check.
func TestWorkerSlotIDInClaims(t *testing.T) {
	const n = 40
	// One gate per execution (the test runs the playbook twice) and slot,
	// opened once by that slot's first claim.
	type gate struct {
		open chan struct{}
		once sync.Once
	}
	var mu sync.Mutex
	gates := map[string]*gate{}
	gateOf := func(executionID string, slot int) *gate {
		mu.Lock()
		defer mu.Unlock()
		k := fmt.Sprintf("%s/%d", executionID, slot)
		if gates[k] == nil {
			gates[k] = &gate{open: make(chan struct{})}
		}
		return gates[k]
	}
	b := newClaimBench(t, n, func(_ context.Context, _ context.CancelFunc, cmd *engine.Command, rep engine.Reporter) engine.Reporter {
		slot := 0
		if strings.Contains(cmd.ID, "/s1.") {
			slot = 1
		}
		own, other := gateOf(cmd.ExecutionID, slot), gateOf(cmd.ExecutionID, 1-slot)
		return reporterFunc{inner: rep, report: func(ctx context.Context, ev eventlog.Event) error {
			if ev.Type == eventlog.TypeFrameDone {
				// A frame.done opens this slot's gate too: a slot that
				// claimed nothing fails the test below instead of holding
				// the other forever.
				own.once.Do(func() { close(own.open) })
				select {
				case <-other.open:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			err := rep.Report(ctx, ev)
			if ev.Type == eventlog.TypeFrameClaimed && err == nil {
				own.once.Do(func() { close(own.open) })
			}
			return err
		}}
	})
	if _, err := b.pool.Exec(context.Background(), "ALTER TABLE "+b.table+" ADD COLUMN owner bigint"); err != nil {
		t.Fatal(err)
	}
	src := header + `
workload: {table: ` + b.table + `}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pgq
        claim: |
          WITH c AS (SELECT id FROM {{ table }} WHERE status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT %(__frame_max_rows)s)
          UPDATE {{ table }} q SET status = 'claimed', owner = %(__worker_slot_id)s
          FROM c WHERE q.id = c.id RETURNING q.id, q.owner, {{ __worker_slot_index }} AS slot_index
      iterator: job
      spec: {mode: cursor, max_in_flight: 2, frame: {max_rows: 5, process: frame}}
    tool:
      kind: postgres
      auth: pg
      command: UPDATE {{ table }} SET status = 'done' WHERE id IN ({{ iter.job | map(attribute='id') | join(',') }})
`
	owners := func(evs []eventlog.Event) map[int]map[int64]bool {
		out := map[int]map[int64]bool{}
		for _, ev := range evs {
			if ev.Type != eventlog.TypeFrameClaimed {
				continue
			}
			var p struct {
				Rows []struct {
					Values struct {
						Owner     int64 `json:"owner"`
						SlotIndex int   `json:"slot_index"`
					} `json:"values"`
				} `json:"rows"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			slot := 0
			if strings.Contains(ev.CommandID, "/s1.") {
				slot = 1
			}
			for _, r := range p.Rows {
				if r.Values.SlotIndex != slot {
					t.Fatalf("%s claimed with __worker_slot_index %d", ev.CommandID, r.Values.SlotIndex)
				}
				if out[slot] == nil {
					out[slot] = map[int64]bool{}
				}
				out[slot][r.Values.Owner] = true
			}
		}
		return out
	}
	var seen []int64
	for run := range 2 {
		if _, err := b.pool.Exec(context.Background(), "UPDATE "+b.table+" SET status = 'pending'"); err != nil {
			t.Fatal(err)
		}
		sum, evs := b.run(t, src)
		if sum.Status != engine.StatusCompleted {
			t.Fatalf("run %d: status %s: %s", run, sum.Status, sum.Error)
		}
		o := owners(evs)
		if len(o) != 2 {
			t.Fatalf("run %d: claims from slots %v, want both slots", run, o)
		}
		for slot, ids := range o {
			if len(ids) != 1 {
				t.Fatalf("run %d: slot %d claimed under ids %v, want one id per slot", run, slot, ids)
			}
			for id := range ids {
				if id <= 0 || id >= 1<<53 {
					t.Fatalf("__worker_slot_id %d is not in (0, 2^53)", id)
				}
				for _, prev := range seen {
					if prev == id {
						t.Fatalf("__worker_slot_id %d used by two slots or executions", id)
					}
				}
				seen = append(seen, id)
			}
		}
	}
}

// TestCancelIsBoundedByTheLease: a frame whose row blocks does not hold a
// cancel up forever: one lease after the cancel the row is interrupted.
// With a release statement its rows go back to pending; without one they
// cannot, and frame.done lists them as abandoned rather than pretending.
func TestCancelIsBoundedByTheLease(t *testing.T) {
	for _, withRelease := range []bool{true, false} {
		t.Run(fmt.Sprintf("release %v", withRelease), func(t *testing.T) {
			const n = 20
			b := newClaimBench(t, n, func(_ context.Context, _ context.CancelFunc, _ *engine.Command, rep engine.Reporter) engine.Reporter {
				return rep
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			gate, err := b.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer gate.Release()
			key := rand.Int64N(1 << 40)
			if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
				t.Fatal(err)
			}
			defer func() { _, _ = gate.Exec(context.Background(), "SELECT pg_advisory_unlock_all()") }()
			release := ""
			if withRelease {
				release = `
        release: UPDATE {{ table }} SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})`
			}
			body := fmt.Sprintf(`SELECT pg_advisory_lock_shared(%d); UPDATE {{ table }} SET status = 'done' WHERE id = {{ iter.job.id }}`, key)
			id, err := b.eng.Start(ctx, []byte(b.playbook(release, "max_rows: 5, lease_seconds: 1", body)), engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The first row's body waits on the gate.
			pollCount(t, ctx, b.pool, fmt.Sprintf(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
				AND classid::text::bigint = %d AND objid::text::bigint = %d AND NOT granted`, key>>32, key&(1<<32-1)), 1)
			if err := b.eng.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
			sum, err := b.eng.Wait(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := b.log.Read(ctx, id, 0, 0)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCancelled {
				t.Fatalf("status %s, want cancelled", sum.Status)
			}
			var abandoned []string
			for _, ev := range evs {
				if ev.Type == eventlog.TypeFrameDone {
					var p struct {
						Abandoned []string `json:"abandoned"`
					}
					if err := json.Unmarshal(ev.Payload, &p); err != nil {
						t.Fatal(err)
					}
					abandoned = append(abandoned, p.Abandoned...)
				}
			}
			counts, _ := b.counts(t)
			if withRelease {
				if counts["pending"] != n || len(abandoned) != 0 {
					t.Fatalf("statuses %v, abandoned %v; want every row pending again", counts, abandoned)
				}
				return
			}
			if counts["claimed"] != 5 || counts["pending"] != n-5 || len(abandoned) != 5 {
				t.Fatalf("statuses %v, abandoned %v; want the frame's 5 rows claimed and listed as abandoned", counts, abandoned)
			}
		})
	}
}
