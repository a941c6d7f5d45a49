package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
)

// TestDeadBacklogLongerThanOneClaim: a queue whose head holds more rows
// past max_attempts than one claim sets aside (a max_attempts lowered on
// a table of old rows), with healthy rows behind them. A claim that
// stops at its round limit with only dead rows is not the end of the
// source: every dead row is reported and buried, and every healthy row
// behind them runs.
func TestDeadBacklogLongerThanOneClaim(t *testing.T) {
	t.Parallel()
	const deadRows, liveRows = 250, 30
	db, path := sqlitetest.Queue(t, `CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL DEFAULT 'pending',
		attempts INT NOT NULL DEFAULT 0);
		WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 280)
		INSERT INTO jobs (id, attempts) SELECT i, CASE WHEN i <= 250 THEN 7 ELSE 0 END FROM s`)
	e, log := sqliteEngine(t, path, okTools())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor:
        kind: sqlite
        auth: q
        max_attempts: 3
        claim: |
          UPDATE jobs SET status = 'claimed', attempts = attempts + 1
          WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }})
          RETURNING id, attempts
        ack: UPDATE jobs SET status = 'done' WHERE id IN ({{ keys | join(',') }})
        release: UPDATE jobs SET status = 'pending' WHERE id IN ({{ keys | join(',') }})
        dead_letter: UPDATE jobs SET status = 'dead' WHERE id IN ({{ keys | join(',') }})
      iterator: job
      spec:
        mode: cursor
        frame: {max_rows: 1}
    tool: {kind: ok}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("%v %+v", err, sum)
	}
	var done, dead, other int
	if err := db.QueryRow(`SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'dead'),
		count(*) FILTER (WHERE status NOT IN ('done', 'dead')) FROM jobs`).Scan(&done, &dead, &other); err != nil {
		t.Fatal(err)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	l := st.Loops["start#1"]
	if done != liveRows || dead != deadRows || other != 0 || l.OK != liveRows || l.Dead != deadRows {
		t.Fatalf("jobs: %d done, %d dead, %d neither; loop %d ok, %d dead; want %d done and %d dead, all reported",
			done, dead, other, l.OK, l.Dead, liveRows, deadRows)
	}
}
