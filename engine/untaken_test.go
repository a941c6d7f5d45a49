package engine_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/cursor"
	pgdriver "github.com/cursorflow/cursorflow/drivers/postgres"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// untakenLease is the frames' lease_seconds in the outage tests, and
// untakenLapse moves the fake clock past it.
const (
	untakenLease = 10 * time.Second
	untakenLapse = untakenLease + time.Second
)

// outageBench is a drain of a SQLite queue of six jobs, three per frame
// and one slot, with max_attempts 2, whose engine runs no worker of its
// own (a holdingDispatcher keeps what it is sent) on a fake clock: the
// test plays the workers, and the outage is time passing with none of
// them up.
type outageBench struct {
	e   *engine.Engine
	d   *holdingDispatcher
	clk *clock.Fake
	log *eventlog.Memory
	// db is the SQLite queue, pg the PostgreSQL one (newOutageBenchOn):
	// one of them is nil.
	db     *sql.DB
	pg     *pgxpool.Pool
	id     string
	ctx    context.Context
	settle func()
	// cfg is the engine's configuration, for a test that starts another
	// engine on the same log (a resume).
	cfg engine.Config

	mu  sync.Mutex
	ran map[string]int // rows whose body ran to success, by id
}

func newOutageBench(t *testing.T) *outageBench {
	t.Helper()
	return newOutageBenchLogging(t, nil)
}

// newOutageBenchLogging is newOutageBench with the engine logging to
// logger (nil: slog.Default()).
func newOutageBenchLogging(t *testing.T, logger *slog.Logger) *outageBench {
	t.Helper()
	return newOutageBenchOn(t, "sqlite", logger)
}

// newOutageBenchOn is newOutageBenchLogging with the queue in source:
// "sqlite", or "postgres" (a table in a schema of its own, claimed FOR
// UPDATE SKIP LOCKED as users claim a PostgreSQL queue), where claims do
// not exclude each other (cursor.Features.ExclusiveClaim).
func newOutageBenchOn(t *testing.T, source string, logger *slog.Logger) *outageBench {
	t.Helper()
	b := &outageBench{d: &holdingDispatcher{}, clk: clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		log: eventlog.NewMemory(), ran: map[string]int{}}
	cursors := cursor.NewRegistry()
	t.Cleanup(func() { _ = cursors.Close() })
	var url string
	playbook := jobsPlaybook([]string{jobsAck, `dead_letter: UPDATE jobs SET status = 'dead' WHERE id IN ({{ keys | join(',') }})`},
		1, `{max_rows: 3, process: row, lease_seconds: 10, max_attempts: 2}`, `{kind: job, id: '{{ iter.job.id }}'}`)
	switch source {
	case "sqlite":
		b.db, url = jobsQueue(t, 6)
		_ = cursors.Register("sqlite", sqlitedriver.New(sqlitedriver.Config{}))
	case "postgres":
		url = testenv.PostgresSchema(t)
		testenv.Exec(t, url, `CREATE TABLE jobs (id int PRIMARY KEY, status text NOT NULL DEFAULT 'pending');
			INSERT INTO jobs (id) SELECT generate_series(1, 6)`)
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		b.pg = pool
		_ = cursors.Register("postgres", pgdriver.New(pgdriver.Config{}))
		playbook = strings.Replace(strings.Replace(playbook, "kind: sqlite", "kind: postgres", 1),
			"LIMIT {{ __frame_max_rows }})", "LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED)", 1)
	default:
		t.Fatalf("outage bench on %q", source)
	}
	reg := tools.NewRegistry()
	reg.MustRegister("job", tools.ToolFunc(func(ctx context.Context, call *tools.Call) (tools.Output, error) {
		if err := ctx.Err(); err != nil {
			return tools.Output{}, err // its worker died: nothing of the body was done
		}
		b.mu.Lock()
		b.ran[fmt.Sprint(call.Config["id"])]++
		b.mu.Unlock()
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	b.cfg = engine.Config{Log: b.log, Tools: reg, Cursors: cursors, Dispatcher: b.d, Clock: b.clk, Tick: time.Millisecond, Logger: logger,
		Keychain: tools.StaticURLs(map[string]string{"q": url})}
	e, err := engine.New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	b.e = e
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	b.ctx = ctx
	b.id, err = e.Start(ctx, []byte(playbook), engine.StartOptions{File: "outage.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	b.settle = settler(ctx, t, e)
	return b
}

// latest returns the last command the engine issued, once everything the
// clock or a report set off is decided.
func (b *outageBench) latest(t *testing.T) *engine.Command {
	t.Helper()
	b.settle()
	cmds := b.d.issued()
	if len(cmds) == 0 {
		t.Fatal("nothing issued")
	}
	return cmds[len(cmds)-1]
}

// crashAfterClaim runs cmd on a worker that dies as soon as its claim is
// on record: nothing of the frame's body is done, nothing more reported.
func (b *outageBench) crashAfterClaim(t *testing.T, cmd *engine.Command) {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	_ = b.e.Worker().Execute(ctx, cmd, crashAfterClaim(ctx, cancel, b.e.Reporter()))
	b.settle()
}

// crashOnTake runs cmd on a worker that dies right after it took the
// command: whatever the worker sends at its start reaches the
// orchestrator, nothing after it, and nothing of the body is done. The
// test sends nothing on the worker's behalf: only what the worker itself
// sends as it starts can tell the engine that it took the command.
func (b *outageBench) crashOnTake(t *testing.T, cmd *engine.Command) {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	_ = b.e.Worker().Execute(ctx, cmd, &dieOnTake{inner: b.e.Reporter(), ctx: ctx, die: cancel})
	b.settle()
}

// dieOnTake passes its worker's first heartbeat and dies then.
type dieOnTake struct {
	inner engine.Reporter
	ctx   context.Context
	die   context.CancelFunc
}

func (r *dieOnTake) Report(ctx context.Context, ev eventlog.Event) error { return context.Canceled }
func (r *dieOnTake) Heartbeat(ctx context.Context, e, c string) error {
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	defer r.die()
	return r.inner.Heartbeat(ctx, e, c)
}

// runBack is the worker back: it runs cmd, and whatever the engine
// dispatches after it, to the end of the execution.
func (b *outageBench) runBack(t *testing.T, cmd *engine.Command) *engine.Summary {
	t.Helper()
	return b.runEach(t, cmd, nil)
}

// runEach is runBack with each command passed through each (when not nil)
// before it runs.
func (b *outageBench) runEach(t *testing.T, cmd *engine.Command, each func(*engine.Command) *engine.Command) *engine.Summary {
	t.Helper()
	seen := len(b.d.issued())
	for cmd != nil {
		if each != nil {
			cmd = each(cmd)
		}
		if err := b.e.Worker().Execute(b.ctx, cmd, b.e.Reporter()); err != nil {
			t.Fatalf("%s: %v", cmd.ID, err)
		}
		b.settle()
		cmd = nil
		if cmds := b.d.issued(); len(cmds) > seen {
			cmd, seen = cmds[seen], seen+1
		}
	}
	sum, err := b.e.Wait(b.ctx, b.id)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func (b *outageBench) statuses(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, s := range []string{"pending", "claimed", "done", "dead"} {
		var n int
		var err error
		if b.pg != nil {
			err = b.pg.QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE status = $1`, s).Scan(&n)
		} else {
			err = b.db.QueryRow(`SELECT count(*) FROM jobs WHERE status = ?`, s).Scan(&n)
		}
		if err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// stall plays, on the PostgreSQL queue, a claimer that stalled with
// every row claimed and unrecorded: a transaction of its own claims them
// and stays open, so the natural claim (SKIP LOCKED) passes them by. It
// returns the source taking them back: the transaction ends, as the
// server ends a stalled claimer's by its lease
// (idle_in_transaction_session_timeout).
func (b *outageBench) stall(t *testing.T) (takeBack func()) {
	t.Helper()
	tx, err := b.pg.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(b.ctx, `WITH c AS (UPDATE jobs SET status = 'claimed' WHERE status = 'pending' RETURNING id) SELECT count(*) FROM c`).Scan(&n); err != nil || n != 6 {
		_ = tx.Rollback(b.ctx)
		t.Fatalf("stalled claim: locked %d rows (%v), want 6", n, err)
	}
	var once sync.Once
	takeBack = func() {
		once.Do(func() {
			if err := tx.Rollback(context.WithoutCancel(b.ctx)); err != nil {
				t.Errorf("stalled claim: rollback: %v", err)
			}
		})
	}
	t.Cleanup(takeBack)
	return takeBack
}

func (b *outageBench) events(t *testing.T) []eventlog.Event {
	t.Helper()
	evs, err := b.log.Read(b.ctx, b.id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// reason returns the reason a command.issued payload gives.
func reason(t *testing.T, ev eventlog.Event) (reason, settle string) {
	t.Helper()
	var p struct{ Reason, Settle string }
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.Reason, p.Settle
}

// outage plays the first frame's worker dying after its claim, then n
// lease expiries with no worker up, each of which must re-issue the frame
// with its rows, uncounted. It returns the current attempt.
func (b *outageBench) outage(t *testing.T, n int) *engine.Command {
	t.Helper()
	first := b.latest(t)
	if first.ID != "start#1/s0.f1@1" {
		t.Fatalf("first command %s", first.ID)
	}
	b.crashAfterClaim(t, first)
	b.clk.Advance(untakenLapse)
	cur := b.latest(t)
	if cur.Attempt != 2 || len(cur.Rows) != 3 || cur.Settle != "" {
		t.Fatalf("after the taken attempt expired: %s settle %q with %d rows, want attempt 2 with the 3 recorded rows", cur.ID, cur.Settle, len(cur.Rows))
	}
	for i := 1; i <= n; i++ {
		b.clk.Advance(untakenLapse)
		next := b.latest(t)
		if next.Attempt != cur.Attempt+1 || next.Base != cur.Base {
			t.Fatalf("expiry %d with no worker up: latest command %s, want attempt %d of %s", i, next.ID, cur.Attempt+1, cur.Base)
		}
		if next.Settle != "" || len(next.Rows) != 3 {
			t.Fatalf("expiry %d with no worker up (1 taken attempt, max_attempts 2): attempt %d settles %q with %d rows, want the 3 rows to run",
				i, next.Attempt, next.Settle, len(next.Rows))
		}
		cur = next
	}
	return cur
}

// TestOutageLongerThanMaxAttemptsDeadLettersNothing: the first frame's
// worker dies after its claim, and then no worker is up for longer than
// max_attempts leases. Each expiry re-issues the frame with its rows, but
// only the attempt a worker took counts: none is dead-lettered, and once
// a worker is back the rows run once and the loop completes with every
// row ok.
func TestOutageLongerThanMaxAttemptsDeadLettersNothing(t *testing.T) {
	t.Parallel()
	const expiries = 5 // with no worker up; max_attempts is 2
	b := newOutageBench(t)
	cur := b.outage(t, expiries)
	sum := b.runBack(t, cur)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if res := data(t, sum, "start"); res["ok"] != int64(6) || res["dead"] != int64(0) {
		t.Fatalf("loop result %v, want 6 ok, none dead", res)
	}
	if st := b.statuses(t); st["done"] != 6 {
		t.Fatalf("job statuses %v, want 6 done", st)
	}
	b.mu.Lock()
	if len(b.ran) != 6 {
		t.Errorf("%d rows ran, want 6: %v", len(b.ran), b.ran)
	}
	for id, n := range b.ran {
		if n != 1 {
			t.Errorf("row %s ran %d times, want once", id, n)
		}
	}
	b.mu.Unlock()
	counts := map[string]int{}
	for _, ev := range b.events(t) {
		if ev.Type != eventlog.TypeCommandIssued || !strings.HasPrefix(ev.CommandID, "start#1/s0.f1@") {
			continue
		}
		r, settle := reason(t, ev)
		counts[r+"/"+settle]++
	}
	want := map[string]int{"/": 1, "lease/": 1, "lease_untaken/": expiries}
	if !reflect.DeepEqual(counts, want) {
		t.Fatalf("frame 1 issued %v (reason/settle), want %v", counts, want)
	}
}

// TestAttemptTakenAndLostStillCounts: a worker that takes an attempt and
// dies at once (a command that crashes its worker) loses an attempt that
// counts, as before: the second such expiry reaches max_attempts 2 and
// the frame's rows go to the dead letter. Only what the worker sends as
// it starts tells the engine it took the attempt.
func TestAttemptTakenAndLostStillCounts(t *testing.T) {
	t.Parallel()
	b := newOutageBench(t)
	first := b.latest(t)
	b.crashAfterClaim(t, first)
	b.clk.Advance(untakenLapse)
	second := b.latest(t)
	if second.Attempt != 2 || len(second.Rows) != 3 {
		t.Fatalf("re-issue %s with %d rows", second.ID, len(second.Rows))
	}
	b.crashOnTake(t, second)
	b.clk.Advance(untakenLapse)
	dl := b.latest(t)
	if dl.Attempt != 3 || dl.Settle != engine.SettleDeadLetter || len(dl.Rows) != 3 {
		t.Fatalf("after two taken attempts were lost (max_attempts 2): %s settles %q with %d rows, want attempt 3 dead-lettering the 3 rows",
			dl.ID, dl.Settle, len(dl.Rows))
	}
	if !strings.Contains(dl.SettleReason, "lease expired 2 times") {
		t.Fatalf("settle reason %q", dl.SettleReason)
	}
	sum := b.runBack(t, dl)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if res := data(t, sum, "start"); res["ok"] != int64(3) || res["dead"] != int64(3) {
		t.Fatalf("loop result %v, want 3 ok, 3 dead", res)
	}
	if st := b.statuses(t); st["done"] != 3 || st["dead"] != 3 {
		t.Fatalf("job statuses %v, want 3 done, 3 dead", st)
	}
}

// TestSnapshotKeepsTakenAttemptCounts: the history of an outage (one
// taken attempt lost, then expiries with no worker up), folded, encoded
// and restored, decides as the fold does: another expiry nobody took is
// re-issued uncounted, and one a worker took is the second that counts,
// which with max_attempts 2 dead-letters the rows.
func TestSnapshotKeepsTakenAttemptCounts(t *testing.T) {
	t.Parallel()
	b := newOutageBench(t)
	cur := b.outage(t, 3)
	h := b.events(t)
	folded, err := engine.Fold(b.id, h)
	if err != nil {
		t.Fatal(err)
	}
	data, err := folded.MarshalSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	later := h[len(h)-1].Time.Add(untakenLapse)
	for _, tc := range []struct {
		reason, wantReason, wantSettle string
	}{
		{"lease_untaken", "lease_untaken", ""},
		{"", "lease", engine.SettleDeadLetter},
	} {
		restored, err := engine.UnmarshalState(data)
		if err != nil {
			t.Fatal(err)
		}
		again, err := engine.Fold(b.id, h)
		if err != nil {
			t.Fatal(err)
		}
		if diff := stateDiff(comparable(restored), comparable(again)); diff != "" {
			t.Fatalf("restored state differs from the fold: %s", diff)
		}
		got, want := restored.Decide(later, []string{cur.ID}, tc.reason), again.Decide(later, []string{cur.ID}, tc.reason)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("expiry %q: restored decides\n%v\nthe fold decides\n%v", tc.reason, got, want)
		}
		if len(got) != 1 || got[0].Type != eventlog.TypeCommandIssued || got[0].Attempt != cur.Attempt+1 {
			t.Fatalf("expiry %q: decided %v, want one re-issue", tc.reason, got)
		}
		if r, settle := reason(t, got[0]); r != tc.wantReason || settle != tc.wantSettle {
			t.Fatalf("expiry %q: re-issued for %q settling %q, want %q settling %q", tc.reason, r, settle, tc.wantReason, tc.wantSettle)
		}
	}
}
