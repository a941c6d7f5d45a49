package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// TestCancelledRowsAreNotFailed: a cursor loop (release statement) whose
// rows run long is cancelled; one lease after the cancel the rows still
// running are interrupted and handed back. The status counted those rows
// failed (and `run` then printed "N failed" for a queue where nothing
// failed); they count as cancelled, and no row is left claimed. The rows
// that never started go back too, and the status counts them (Returned):
// it left them out, so a cancelled loop's counts did not add up to the
// rows it claimed.
func TestCancelledRowsAreNotFailed(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	pool, table := pgQueue(t, dsn, 20)
	kc := tools.StaticURLs(map[string]string{"pg": dsn})
	treg, creg, closer := stdwire.Registries(kc, nil, false)
	t.Cleanup(func() { _ = closer.Close() })
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Tick: 10 * time.Millisecond, CommandLease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The rows' statement names the table so that this test can tell its
	// own sleeping sessions from those of tests running beside it. The
	// frame lease is reclaim_after's 2 s, which is also the cancel's grace;
	// heartbeats every 0.1 s keep the frames alive through it on a loaded
	// machine. (At a third of the lease, one CI run counted no row at all,
	// most likely a lease that ran out first: the frame is then re-issued
	// to hand its rows back unrun, rows that count as released, not
	// cancelled.)
	sleep := "SELECT pg_sleep(60) AS " + table
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          WITH c AS (SELECT id FROM `+table+` WHERE status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
          UPDATE `+table+` q SET status = 'claimed', attempts = q.attempts + 1 FROM c WHERE q.id = c.id RETURNING q.id
        reclaim_after: 2s
        release: UPDATE `+table+` SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 2
        frame: {max_rows: 5, heartbeat_seconds: 0.1}
    tool: {kind: postgres, auth: pg, command: "`+sleep+`"}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Cancel once the first row of each frame is running: its statement
	// is active on the server. (Rows claimed in the table are not enough:
	// a frame's claim commits before the engine records it and starts its
	// rows, and a frame cancelled before any row started has no row to
	// interrupt.)
	for {
		var running int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = $1", sleep).Scan(&running); err != nil {
			t.Fatal(err)
		}
		if running == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the frames' rows never ran (%d running)", running)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := e.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if sum, err := e.Wait(ctx, id); err != nil || sum.Status != engine.StatusCancelled {
		t.Fatalf("Wait = %+v, %v; want cancelled", sum, err)
	}
	var claimed int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE status <> 'pending'").Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	l := st.Loops["start#1"]
	if claimed != 0 || l.Failed != 0 || l.Cancelled != 2 || l.OK != 0 || l.Done != 0 || l.Abandoned+l.Unreleased != 0 {
		t.Fatalf("loop status %+v, %d rows not pending: want the 2 interrupted rows cancelled, none failed, every row handed back", l, claimed)
	}
	// Two frames of 5 rows, one row running in each: 8 never started.
	if l.Rows != 2 || l.Returned != 8 {
		t.Fatalf("loop status %+v: want 2 row runs (the interrupted rows) and the 8 rows that never started returned", l)
	}
}
