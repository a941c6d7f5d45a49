package natsjs_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/faultlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
	"github.com/cursorflow/cursorflow/tools"
)

// TestChainedFramesOverNATS: a remote worker chains its slots' frames: a
// frame's claim travels with the frame.done before it on <prefix>.chain,
// is recorded in that append, and the next command comes back with the
// answer instead of through the commands stream. Every row runs once and
// none is left claimed.
func TestChainedFramesOverNATS(t *testing.T) {
	const n, maxRows, slots = 400, 10, 3
	rec := logtest.NewRecorder(eventlog.NewMemory())
	b := setupWith(t, 0, 0, func(c *engine.Config) { c.Log = rec })
	b.log = rec
	q := newJobQueue(t, b, n, slots, nil)
	b.run(t, q.playbook(slots, maxRows, "{kind: rec, key: 'job{{ iter.job.id }}'}"))
	q.checkDrained(t, b)
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

// TestChainedAppendStoredButReportedFailedOverNATS: the append of a
// chained claim stores it but answers with an error. The remote worker,
// holding the rows it claimed ahead, sends its chained report again; the
// reloaded execution finds it recorded and answers with the slot's next
// frame, which runs its first attempt with the held rows. Before, the
// worker gave the rows back and the recorded frame waited out its lease
// (an hour here) with nobody running it.
func TestChainedAppendStoredButReportedFailedOverNATS(t *testing.T) {
	const n, maxRows, slots = 200, 10, 2
	fl := faultlog.New(eventlog.NewMemory())
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, AfterCommit: true,
		Match: faultlog.AppendsInOrder(eventlog.TypeFrameDone, eventlog.TypeFrameClaimed)})
	b := setupWith(t, time.Hour, 0, func(c *engine.Config) { c.Log = fl })
	b.log = fl
	q := newJobQueue(t, b, n, slots, nil)
	_, evs := b.run(t, q.playbook(slots, maxRows, "{kind: rec, key: 'job{{ iter.job.id }}'}"))
	if fl.Hits(faultlog.OpAppend) != 1 {
		t.Fatalf("the fault fired %d times, want once", fl.Hits(faultlog.OpAppend))
	}
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && ev.Attempt != 1 {
			t.Fatalf("%s issued again: a recorded frame was re-issued instead of run by the worker holding its rows", ev.CommandID)
		}
	}
	q.checkDrained(t, b)
}

// jobQueue is a SQLite queue of n jobs, drained over NATS by remote
// workers (chaining without bound) with the rec tool.
type jobQueue struct {
	db      *sql.DB
	n       int
	kc      tools.Keychain
	cursors *cursor.Registry
}

// newJobQueue makes the queue and starts its worker (w1) with slots slots;
// more, if set, adds tools to the worker's registry.
func newJobQueue(t *testing.T, b *bundle, n, slots int, more func(*tools.Registry)) *jobQueue {
	t.Helper()
	q := newJobDB(t, n)
	b.startWorker(t, "w1", natsjs.WorkerOptions{Worker: q.worker(b, "w1", more), Concurrency: slots})
	return q
}

// newJobDB makes the queue of n jobs, with no worker yet.
func newJobDB(t *testing.T, n int) *jobQueue {
	t.Helper()
	db, path := sqlitetest.Queue(t, `CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT DEFAULT 'pending');
		WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < `+fmt.Sprint(n)+`)
		INSERT INTO jobs (id) SELECT i FROM g`)
	cursors := cursor.NewRegistry()
	drv := sqlitedriver.New(sqlitedriver.Config{})
	t.Cleanup(func() { _ = drv.Close() }) // after the workers stop
	_ = cursors.Register("sqlite", drv)
	return &jobQueue{db: db, n: n, kc: tools.StaticURLs(map[string]string{"q": path}), cursors: cursors}
}

// worker returns the engine side of a worker id of the queue; more, if
// set, adds tools to its registry.
func (q *jobQueue) worker(b *bundle, id string, more func(*tools.Registry)) *engine.Worker {
	treg := tools.NewRegistry()
	treg.MustRegister("rec", b.calls.tool(id))
	if more != nil {
		more(treg)
	}
	return &engine.Worker{ID: id, Tools: treg, Cursors: q.cursors, Keychain: q.kc, MaxChain: -1}
}

// playbook drains the queue with the natural claim, tool running per row.
func (q *jobQueue) playbook(slots, maxRows int, tool string) string {
	return q.playbookFrame(slots, fmt.Sprintf("{max_rows: %d}", maxRows), tool)
}

// playbookFrame is playbook with the loop's frame spec given whole.
func (q *jobQueue) playbookFrame(slots int, frame, tool string) string {
	return fmt.Sprintf(`
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
      spec: {mode: cursor, max_in_flight: %d, frame: %s}
    tool: %s
`, slots, frame, tool)
}

// checkDrained checks that every job ran once (the rec tool) and is done.
func (q *jobQueue) checkDrained(t *testing.T, b *bundle) {
	t.Helper()
	for i := 1; i <= q.n; i++ {
		if c := b.calls.count(fmt.Sprintf("job%d", i)); c != 1 {
			t.Fatalf("row %d ran %d times, want once", i, c)
		}
	}
	var left int
	if err := q.db.QueryRow(`SELECT count(*) FROM jobs WHERE status <> 'done'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows not done (%v)", left, err)
	}
}

// TestChainedFramesKeepTheirPartials: a frame whose rows hand on partial
// results is not chained over NATS (its chained report would bypass the
// events stream the partials travel, and could be recorded first, the
// partials then refused as late): every row's partial is on record, and
// in its frame's command before that frame's frame.done.
func TestChainedFramesKeepTheirPartials(t *testing.T) {
	const n, maxRows, slots = 200, 10, 3
	b := setup(t, 0, 0)
	blob := strings.Repeat("x", 8<<10) // slow to decode: a late partial's chance to fall behind
	q := newJobQueue(t, b, n, slots, func(r *tools.Registry) {
		r.MustRegister("part", tools.ToolFunc(func(_ context.Context, call *tools.Call) (tools.Output, error) {
			call.EmitPartial(map[string]any{"job": call.Config["key"], "blob": blob})
			return tools.Output{Status: tools.StatusSuccess}, nil
		}))
	})
	_, evs := b.run(t, q.playbook(slots, maxRows, "{kind: part, key: 'job{{ iter.job.id }}'}"))
	partials, done := map[string]int{}, map[string]bool{}
	for _, ev := range evs {
		switch ev.Type {
		case eventlog.TypeCallPartial:
			if done[ev.CommandID] {
				t.Fatalf("a partial of %s recorded after its frame.done", ev.CommandID)
			}
			partials[ev.CommandID]++
		case eventlog.TypeFrameDone:
			done[ev.CommandID] = true
		}
	}
	total := 0
	for _, c := range partials {
		total += c
	}
	if total != n {
		t.Fatalf("%d partials recorded, want one per row (%d)", total, n)
	}
}
