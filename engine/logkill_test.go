package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestLogSessionsKilledMidDrain: the PostgreSQL event log's sessions are
// terminated again and again while a cursor drain appends to it (a
// failover, an administrator's pg_terminate_backend), so appends fail on
// the wire, some after their transaction committed and some before. The
// drain completes: every row done, loop.done recorded once, and the
// execution's seqs run from 1 without a gap or a repeat. Each frame's body
// sleeps 20 ms, so that the drain outlasts several rounds of kills
// however fast the machine (CI once drained the 300 rows in 80 ms, before
// a kill met an append).
func TestLogSessionsKilledMidDrain(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresSchema(t)
	_, table := pgQueue(t, dsn, 300)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	app := "cf_logkill_" + testenv.RandomSuffix(t)
	log, err := pglog.Open(ctx, dsn+"&application_name="+app, pglog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })

	e, told, _ := pgLogEngine(t, log, dsn, "event log append failed")

	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          UPDATE `+table+` SET status = 'claimed', attempts = attempts + 1
          WHERE id IN (SELECT id FROM `+table+` WHERE status = 'pending' ORDER BY id
                       LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED)
          RETURNING id, payload
        ack: UPDATE `+table+` SET status = 'done', done_count = done_count + 1 WHERE id IN ({{ keys | join(',') }})
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 4
        frame: {max_rows: 5, process: frame}
    tool: {kind: postgres, auth: pg, command: "SELECT pg_sleep(0.02)"}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	kills := make(chan int, 1)
	go func() {
		n := 0
		defer func() { kills <- n }()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ended:
				return
			case <-tick.C:
			}
			var k int
			testenv.QueryRow(t, dsn, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "+
				"WHERE application_name = '"+app+"' AND pid <> pg_backend_pid()) AS t", &k)
			n += k
		}
	}()
	sum, err := e.Wait(ctx, id)
	close(ended)
	killed := <-kills
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("%v %+v", err, sum)
	}
	select {
	case <-told:
	default:
		t.Fatalf("%d of the log's sessions killed and no append failed: the test did not reach an append", killed)
	}
	// Read back through the drain's own log, whose pool may still hold a
	// session killed last: the read runs again on a new one.
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the log has a gap or a repeat", i, ev.Seq)
		}
	}
	drainedOnce(t, dsn, table, 300, evs)
	t.Logf("%d of the log's sessions killed during the drain", killed)
}
