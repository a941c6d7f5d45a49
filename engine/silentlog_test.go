package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestSilentEventLogIsRiddenOut: the PostgreSQL event log stops
// answering mid-drain with its connections still open (a frozen server,
// a black-holed path). The engine hears of it within the log's
// OperationTimeout, says so, and keeps trying; once the log answers
// again the drain completes with every row done once and loop.done
// recorded once. The engine waited without a word for as long as the
// connections looked alive.
func TestSilentEventLogIsRiddenOut(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresSchema(t)
	_, table := pgQueue(t, dsn, 30)
	proxy, viaProxy := testenv.NewURLProxy(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log, err := pglog.Open(ctx, viaProxy, pglog.Config{OperationTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })

	e, told, treg := pgLogEngine(t, log, dsn, "event log append failed")
	entered, release := registerGate(treg)
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
          RETURNING id
        ack: UPDATE `+table+` SET status = 'done', done_count = done_count + 1 WHERE id IN ({{ keys | join(',') }})
        release: UPDATE `+table+` SET status = 'pending' WHERE id IN ({{ keys | join(',') }}) AND status = 'claimed'
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 2
        frame: {max_rows: 5, row_concurrency: 1}
    tool: {kind: gate}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first row never ran")
	}
	proxy.Hole()
	release()
	select {
	case <-told:
	case <-ctx.Done():
		t.Fatal("the engine never said the silent log failed an append")
	}
	proxy.Resume()
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("%v %+v", err, sum)
	}
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	drainedOnce(t, dsn, table, 30, evs)
	var twice int
	testenv.QueryRow(t, dsn, "SELECT count(*) FILTER (WHERE done_count > 1) FROM "+table, &twice)
	t.Logf("rows acked more than once (a frame re-run after the outage, at least once): %d", twice)
}
