package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
	"github.com/cursorflow/cursorflow/tools"
)

// TestLoopBackStartsAFreshCursorLoop re-enters a cursor step through an
// arc: each entry is a loop of its own, with its own loop id, frames and
// loop.done, draining only what its own claim selects.
func TestLoopBackStartsAFreshCursorLoop(t *testing.T) {
	t.Parallel()
	db, path := sqlitetest.Queue(t, `CREATE TABLE jobs (id INTEGER PRIMARY KEY, round INTEGER, status TEXT DEFAULT 'pending', done_by TEXT);
		WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 30)
		INSERT INTO jobs (id, round) SELECT i, 1 + (i - 1) / 10 FROM s`)
	rec := &recorder{}
	reg := tools.NewRegistry()
	reg.MustRegister("rec", rec.tool())
	reg.MustRegister("mark", tools.ToolFunc(func(ctx context.Context, c *tools.Call) (tools.Output, error) {
		// A failed UPDATE is the row's error outcome, as a tool reports it.
		out := tools.Output{Status: tools.StatusSuccess}
		if _, err := db.ExecContext(ctx, `UPDATE jobs SET status = 'done', done_by = ? WHERE id = ?`, c.Config["loop"], c.Config["id"]); err != nil {
			out = tools.Output{Status: tools.StatusError, Error: err.Error()}
		}
		return out, nil
	}))
	e, log := sqliteEngine(t, path, reg)
	src := header + `
workflow:
  - step: start
    tool: {kind: rec, key: start}
    set: {ctx.round: 1}
    next: [drain]
  - step: drain
    loop:
      cursor:
        kind: sqlite
        auth: q
        claim: |
          UPDATE jobs SET status = 'claimed'
          WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' AND round = {{ ctx.round }} LIMIT {{ __frame_max_rows }})
          RETURNING id
      iterator: job
      spec: {mode: cursor, max_in_flight: 2, frame: {max_rows: 4}}
    tool: {kind: mark, id: '{{ iter.job.id }}', loop: 'round{{ ctx.round }}'}
    next:
      - step: bump
        when: '{{ event.name == "loop.done" }}'
  - step: bump
    tool: {kind: rec, key: 'bump{{ ctx.round }}'}
    set: {ctx.round: '{{ ctx.round + 1 }}'}
    next:
      - step: drain
        when: '{{ ctx.round <= 3 }}'
`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(src), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := log.Read(ctx, id, 0, 0)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	loops := map[string]int{}
	for _, ev := range evs {
		if ev.Type == eventlog.TypeLoopDone {
			loops[ev.LoopID]++
		}
	}
	if len(loops) != 3 || loops["drain#1"] != 1 || loops["drain#2"] != 1 || loops["drain#3"] != 1 {
		t.Fatalf("loop.done per loop id: %v, want drain#1..3 once each", loops)
	}
	rows, err := db.Query(`SELECT round, done_by, count(*) FROM jobs WHERE status = 'done' GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var round, count int
		var by string
		if err := rows.Scan(&round, &by, &count); err != nil {
			t.Fatal(err)
		}
		if by != "round"+string(rune('0'+round)) || count != 10 {
			t.Fatalf("round %d: %d rows done by %s, want 10 by round%d", round, count, by, round)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d rounds done, want 3", n)
	}
}
