package engine_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// TestMaxSecondsRunsLateRowsThatMayNotGoBack: a row a frame reaches after
// its max_seconds goes back to the source only when it may (mayGoBack):
// with max_attempts 1 a hand-back would spend its one delivery, so every
// late row runs in its own frame. The drain runs every row exactly once
// and fails none (TestMaxSecondsCountsRowsHandedBack covers rows that do
// go back).
func TestMaxSecondsRunsLateRowsThatMayNotGoBack(t *testing.T) {
	t.Parallel()
	const rows = 12
	db, log, sum, evs, ran := slowRowsDrain(t, rows, 1)
	defer dumpOnFail(t, evs)
	var done int
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE status = 'done'`).Scan(&done); err != nil {
		t.Fatal(err)
	}
	if done != rows || len(ran) != rows {
		t.Fatalf("%d rows done, %d ran; want %d", done, len(ran), rows)
	}
	for k, n := range ran {
		if n != 1 {
			t.Errorf("row %v ran %d times", k, n)
		}
	}
	st, err := engine.Inspect(context.Background(), log, sum.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if l := st.Loops["start#1"]; l.Rows != rows || l.OK != rows || l.Failed != 0 {
		t.Fatalf("loop counts %+v; want %d rows, all ok, none failed", l, rows)
	}
}

// TestMaxSecondsCountsRowsHandedBack: rows a frame runs out of time for go
// back unrun (they may: max_attempts leaves them another delivery) and the
// loop counts them as returned, beside the rows it ran, so its counts add
// up to its claims. One slot, claims of 4, each row longer than the
// frame's max_seconds: a frame runs its first row and hands the rest back.
func TestMaxSecondsCountsRowsHandedBack(t *testing.T) {
	t.Parallel()
	const rows = 12
	_, log, sum, evs, _ := slowRowsDrain(t, rows, 100)
	defer dumpOnFail(t, evs)
	st, err := engine.Inspect(context.Background(), log, sum.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	// Claims of 4 while 4 or more were pending (12 down to 4: 9 frames,
	// 3 back each), then of 3 and 2 (2 and 1 back), then the last row.
	const back = 9*3 + 2 + 1
	if l := st.Loops["start#1"]; l.Rows != rows || l.OK != rows || l.Returned != back {
		t.Fatalf("loop counts %+v; want %d rows run, all ok, and %d handed back unrun", l, rows, back)
	}
}

// slowRowsDrain drains a SQLite queue of n rows with one slot, claims of
// 4 and a row body (30 ms) longer than the frame's max_seconds (10 ms), so
// that every row but a frame's first starts late; maxAttempts says whether
// a late row may go back. It returns the queue, the log, the execution's
// summary (completed), its events and how many times each row's body ran,
// by id.
func slowRowsDrain(t *testing.T, n, maxAttempts int) (*sql.DB, *eventlog.Memory, *engine.Summary, []eventlog.Event, map[any]int) {
	t.Helper()
	db, path := jobsQueue(t, n)
	var mu sync.Mutex
	ran := map[any]int{}
	reg := tools.NewRegistry()
	reg.MustRegister("slow", tools.ToolFunc(func(ctx context.Context, call *tools.Call) (tools.Output, error) {
		mu.Lock()
		ran[call.Config["id"]]++
		mu.Unlock()
		select {
		case <-time.After(30 * time.Millisecond):
		case <-ctx.Done():
			return tools.Output{}, ctx.Err()
		}
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	e, log := sqliteEngine(t, path, reg)
	sum, evs := runPlaybook(t, e, log, jobsPlaybook([]string{jobsAck, jobsRelease},
		1, fmt.Sprintf(`{max_rows: 4, row_concurrency: 1, process: row, max_seconds: 0.01, max_attempts: %d}`, maxAttempts),
		`{kind: slow, id: '{{ iter.job.id }}'}`), engine.StartOptions{}, time.Minute)
	if sum.Status != engine.StatusCompleted {
		t.Errorf("status %s: %s", sum.Status, sum.Error)
		dumpOnFail(t, evs)
		t.FailNow()
	}
	// The execution has ended, so no body runs any more; the lock orders
	// the bodies' counts before the caller reads them.
	mu.Lock()
	defer mu.Unlock()
	return db, log, sum, evs, ran
}
