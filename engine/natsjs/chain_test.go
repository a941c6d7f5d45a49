package natsjs_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/tools"
)

// TestChainedFramesOverNATS: a remote worker chains its slots' frames: a
// frame's claim travels with the frame.done before it on <prefix>.chain,
// is recorded in that append, and the next command comes back with the
// answer instead of through the commands stream. Every row runs once and
// none is left claimed.
func TestChainedFramesOverNATS(t *testing.T) {
	const n, maxRows, slots = 400, 10, 3
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT DEFAULT 'pending');
		WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ` + fmt.Sprint(n) + `)
		INSERT INTO jobs (id) SELECT i FROM g`); err != nil {
		t.Fatal(err)
	}
	rec := logtest.NewRecorder(eventlog.NewMemory())
	b := setupWith(t, 0, 0, func(c *engine.Config) { c.Log = rec })
	b.log = rec
	kc := tools.StaticURLs(map[string]string{"q": path})
	cursors := cursor.NewRegistry()
	drv := sqlitedriver.New(sqlitedriver.Config{})
	t.Cleanup(func() { _ = drv.Close() }) // after the worker stops
	_ = cursors.Register("sqlite", drv)
	treg := tools.NewRegistry()
	treg.MustRegister("rec", b.calls.tool("w1"))
	w := &engine.Worker{ID: "w1", Tools: treg, Cursors: cursors, Keychain: kc, MaxChain: -1}
	b.startWorker(t, "w1", natsjs.WorkerOptions{Worker: w, Concurrency: slots})
	b.run(t, fmt.Sprintf(`
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
        ack: UPDATE jobs SET status = 'done' WHERE id IN ({{ keys | join(',') }})
      iterator: job
      spec: {mode: cursor, max_in_flight: %d, frame: {max_rows: %d}}
    tool: {kind: rec, key: 'job{{ iter.job.id }}'}
`, slots, maxRows))
	for i := 1; i <= n; i++ {
		if c := b.calls.count(fmt.Sprintf("job%d", i)); c != 1 {
			t.Fatalf("row %d ran %d times, want once", i, c)
		}
	}
	var left int
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE status <> 'done'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows not done (%v)", left, err)
	}
	var chained, claims int
	for _, batch := range rec.Batches() {
		done := false
		for _, ev := range batch {
			switch ev.Type {
			case eventlog.TypeFrameDone:
				done = true
			case eventlog.TypeFrameClaimed:
				claims++
				if done {
					chained++
				}
			}
		}
	}
	if claims != n/maxRows || chained != claims-slots {
		t.Fatalf("%d claims, %d recorded with a frame.done: want %d and %d", claims, chained, n/maxRows, n/maxRows-slots)
	}
}
