package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
	"github.com/cursorflow/cursorflow/tools"
)

// TestFailedAckHandsRowsBack: a frame whose ack statement fails stops the
// loop, and its rows, which ran but which the source still holds claimed,
// go back through the release statement: none is left claimed when the
// execution ends (it cannot be resumed to settle them).
func TestFailedAckHandsRowsBack(t *testing.T) {
	t.Parallel()
	db, path := sqlitetest.Queue(t, `CREATE TABLE jobs (id INTEGER PRIMARY KEY,
			status TEXT NOT NULL DEFAULT 'pending' CHECK (status <> 'bad'));
		WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 100)
		INSERT INTO jobs (id) SELECT i FROM s`)
	reg := tools.NewRegistry()
	reg.MustRegister("ok", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	e, _ := sqliteEngine(t, path, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The ack of the frame holding row 50 breaks the table's CHECK.
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor:
        kind: sqlite
        auth: q
        claim: |
          UPDATE jobs SET status = 'claimed'
          WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }})
          RETURNING id
        ack: UPDATE jobs SET status = CASE WHEN id = 50 THEN 'bad' ELSE 'done' END WHERE id IN ({{ keys | join(',') }})
        release: UPDATE jobs SET status = 'pending' WHERE id IN ({{ keys | join(',') }})
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 2
        frame: {max_rows: 10, process: row}
    tool: {kind: ok}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "ack") {
		t.Fatalf("status %s: %s; want failed on the ack", sum.Status, sum.Error)
	}
	var claimed, pending50 int
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE status = 'claimed'`).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE id = 50 AND status = 'pending'`).Scan(&pending50); err != nil {
		t.Fatal(err)
	}
	if claimed != 0 || pending50 != 1 {
		t.Fatalf("%d rows left claimed, row 50 pending: %v; want none claimed and row 50 handed back", claimed, pending50 == 1)
	}
}
