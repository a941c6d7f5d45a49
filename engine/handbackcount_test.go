package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
)

// TestHandBackDoesNotBuryRows: rows a frame hands back unrun (past its
// max_bytes) cost a delivery on a source that counts them; a row whose
// next delivery would pass max_attempts runs now instead of going back,
// so that no healthy row is dead-lettered without ever running.
func TestHandBackDoesNotBuryRows(t *testing.T) {
	t.Parallel()
	db, path := sqlitetest.Queue(t, `CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL DEFAULT 'pending',
		attempts INT NOT NULL DEFAULT 0, pad TEXT NOT NULL);
		WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 20)
		INSERT INTO jobs (id, pad) SELECT i, '`+strings.Repeat("x", 1000)+`' FROM s`)
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
        max_attempts: 2
        claim: |
          UPDATE jobs SET status = 'claimed', attempts = attempts + 1
          WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }})
          RETURNING id, attempts, pad
        ack: UPDATE jobs SET status = 'done' WHERE id IN ({{ keys | join(',') }})
        release: UPDATE jobs SET status = 'pending' WHERE id IN ({{ keys | join(',') }})
        dead_letter: UPDATE jobs SET status = 'dead' WHERE id IN ({{ keys | join(',') }})
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 2
        frame: {max_rows: 10, max_bytes: 1500}
    tool: {kind: ok}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := e.Wait(ctx, id); err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("%v %+v", err, sum)
	}
	var done, dead int
	if err := db.QueryRow(`SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'dead') FROM jobs`).Scan(&done, &dead); err != nil {
		t.Fatal(err)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	if done != 20 || dead != 0 || st.Loops["start#1"].Dead != 0 {
		t.Fatalf("%d rows done, %d dead (loop %+v); want all 20 done", done, dead, st.Loops["start#1"])
	}
}
