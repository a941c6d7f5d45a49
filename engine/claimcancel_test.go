package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestCancelEndsAClaimBlockedOnALock: another session holds the queue
// table locked (a migration's ACCESS EXCLUSIVE lock, left open), so the
// loop's claim waits in PostgreSQL. Waiting is fine; but a cancel of the
// execution must end it. Before, the claim ran on the worker's context,
// which the cancel does not end: the execution stayed "running" until the
// frame's lease ran out (60 s here), and the worker's slot and connection
// stayed blocked until the lock was released, long after. Now the cancel
// cuts the claim: the execution is cancelled at once, the frame reports
// the cancel, and no session of the engine still waits on the lock.
func TestCancelEndsAClaimBlockedOnALock(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	pool, table := pgQueue(t, dsn, 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	lockConn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lockConn.Release()
	lockTx, err := lockConn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lockTx.Rollback(context.Background()) }()
	if _, err := lockTx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	e, log := cursorEngine(t, dsn)
	src := frameDrain(table, "{kind: noop}")
	id, err := e.Start(ctx, []byte(src), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The claim is waiting on the lock once PostgreSQL shows a session
	// other than the lock holder waiting for a lock on the table.
	waiting := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = $1::regclass`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	pollUntil(ctx, t, func() bool { return waiting() > 0 }, "the claim never waited on the lock")
	// Well under the frame's 60 s lease, which ended the cancel before.
	sum, took := cancelWithin(ctx, t, e, id, 15*time.Second, "while its claim waited on a lock")
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dumpOnFail(t, evs) })
	if sum.Status != engine.StatusCancelled {
		t.Fatalf("status %s, want cancelled", sum.Status)
	}
	var reported bool
	for _, ev := range evs {
		if ev.Type == eventlog.TypeFrameDone && strings.Contains(string(ev.Payload), `"cancelled":true`) {
			reported = true
		}
	}
	if !reported {
		t.Fatalf("no frame.done saying the frame was cancelled")
	}
	// The server takes the client's cancel request asynchronously.
	gone := time.After(5 * time.Second)
	for n := waiting(); n != 0; n = waiting() {
		select {
		case <-gone:
			t.Fatalf("%d sessions still wait on the lock 5 s after the cancel: the claim was not cut", n)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Logf("cancelled %v after the cancel, the lock still held", took.Round(time.Millisecond))
}

// TestCancelEndsAClaimOnASilentConnection: the queue's database sits
// behind a proxy that goes silent (packets dropped, no reset) after a
// first drain left a pooled connection open. The next execution's claim
// is sent on that connection and its answer never comes: the frame's
// heartbeats keep its lease alive, so nothing ends it but a cancel. Before,
// the cancel did not reach the claim: the execution stayed "running"
// until the frame's lease ran out (60 s here) and the worker's claim
// stayed blocked for good. Now the cancel cuts the claim at once.
func TestCancelEndsAClaimOnASilentConnection(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	pool, table := pgQueue(t, dsn, 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proxy, viaProxy := testenv.NewURLProxy(t, dsn)
	e, log := cursorEngine(t, viaProxy)
	src := frameDrain(table, "{kind: noop}")
	if sum, _ := runPlaybook(t, e, log, src, engine.StartOptions{}, 30*time.Second); sum.Status != engine.StatusCompleted {
		t.Fatalf("first drain, through the proxy still forwarding: %s %s", sum.Status, sum.Error)
	}
	if _, err := pool.Exec(ctx, "UPDATE "+table+" SET status = 'pending'"); err != nil {
		t.Fatal(err)
	}
	proxy.Hole()
	// The network comes back at the end, so that closing the pool does
	// not wait on the silent connections.
	defer proxy.Resume()
	id, err := e.Start(ctx, []byte(src), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The claim is in the hole once the proxy holds bytes it did not pass.
	pollUntil(ctx, t, func() bool { return proxy.Held() > 0 }, "nothing was sent into the hole")
	sum, took := cancelWithin(ctx, t, e, id, 15*time.Second, "while its claim waited on a silent connection")
	if sum.Status != engine.StatusCancelled {
		t.Fatalf("status %s, want cancelled", sum.Status)
	}
	t.Logf("cancelled %v after the cancel, the connection still silent", took.Round(time.Millisecond))
}

// pollUntil polls cond (a state of a server outside the test's control)
// until it holds, failing t with msg if ctx ends first.
func pollUntil(ctx context.Context, t *testing.T, cond func() bool, msg string) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal(msg)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cancelWithin cancels execution id and waits for it to end, failing t
// if it does not within d; it returns its summary and how long it took.
func cancelWithin(ctx context.Context, t *testing.T, e *engine.Engine, id string, d time.Duration, while string) (*engine.Summary, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := e.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	sum, err := e.Wait(wctx, id)
	if err != nil {
		t.Fatalf("the execution did not end within %v of its cancel %s: %v", d, while, err)
	}
	return sum, time.Since(start)
}

// frameDrain is a playbook draining table on one slot, a frame of 5 rows
// at a time, with tool as each frame's body; its lease (60 s) is longer
// than any cancel these tests wait for.
func frameDrain(table, tool string) string {
	return strings.ReplaceAll(header+`workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg`+claimSQL+`
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 1
        frame: {max_rows: 5, process: frame, lease_seconds: 60}
    tool: `+tool+`
`, "{{ table }}", table)
}

// TestCancelEndsAClaimMadeAhead: the claim a frame makes for the slot's
// next frame, before it reports (chaining), is cut by a cancel too. The
// first frame's body waits on an advisory lock the test holds; meanwhile
// the test locks the queue table, then lets the body finish, so the claim
// made ahead waits on the table lock when the cancel comes.
func TestCancelEndsAClaimMadeAhead(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	pool, table := pgQueue(t, dsn, 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := rand.Int64()
	hold := func() (pgx.Tx, func()) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		return tx, func() { once.Do(func() { _ = tx.Rollback(context.Background()); c.Release() }) }
	}
	gate, openGate := hold()
	defer openGate()
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", key); err != nil {
		t.Fatal(err)
	}
	e, _ := cursorEngine(t, dsn)
	id, err := e.Start(ctx, []byte(frameDrain(table, fmt.Sprintf(`{kind: postgres, auth: pg, command: "SELECT pg_advisory_xact_lock(%d)"}`, key))), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waiting := func(what string) func() bool {
		return func() bool {
			var n int
			q := `SELECT count(*) FROM pg_locks WHERE NOT granted AND ` + what
			if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		}
	}
	pollUntil(ctx, t, waiting("locktype = 'advisory'"), "the first frame's body never waited on the advisory lock")
	lock, unlock := hold()
	defer unlock()
	if _, err := lock.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	openGate()
	pollUntil(ctx, t, waiting("relation = '"+table+"'::regclass"), "the claim made ahead never waited on the table lock")
	sum, took := cancelWithin(ctx, t, e, id, 15*time.Second, "while its claim made ahead waited on a lock")
	if sum.Status != engine.StatusCancelled {
		t.Fatalf("status %s, want cancelled", sum.Status)
	}
	t.Logf("cancelled %v after the cancel, the lock still held", took.Round(time.Millisecond))
}
