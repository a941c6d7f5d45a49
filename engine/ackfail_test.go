package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
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
	e, log := sqliteEngine(t, path, okTools())
	// The ack of the frame holding row 50 breaks the table's CHECK.
	sum, evs := runPlaybook(t, e, log, jobsPlaybook([]string{
		`ack: UPDATE jobs SET status = CASE WHEN id = 50 THEN 'bad' ELSE 'done' END WHERE id IN ({{ keys | join(',') }})`, jobsRelease},
		2, `{max_rows: 10, process: row}`, `{kind: ok}`), engine.StartOptions{}, time.Minute)
	defer dumpOnFail(t, evs)
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

// TestFailedReleaseStopsTheLoop: a failed row goes back through the
// release statement; when that statement fails (here it names a column
// the table lacks, as a typo would), the row stays claimed and nothing
// would bring it back. The loop stops naming the release, and the row is
// on record as left claimed (frame.done's abandoned, the loop's
// Abandoned count) instead of vanishing from a completed run.
func TestFailedReleaseStopsTheLoop(t *testing.T) {
	t.Parallel()
	db, path := jobsQueue(t, 100)
	reg := tools.NewRegistry()
	reg.MustRegister("failon30", tools.ToolFunc(func(_ context.Context, c *tools.Call) (tools.Output, error) {
		if c.Config["id"] == int64(30) {
			return tools.Output{Status: tools.StatusError, Error: "row 30 fails"}, nil
		}
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	e, log := sqliteEngine(t, path, reg)
	sum, evs := runPlaybook(t, e, log, jobsPlaybook([]string{jobsAck,
		`release: UPDATE jobs SET statuz = 'pending' WHERE id IN ({{ keys | join(',') }})`},
		2, `{max_rows: 10, process: row}`, `{kind: failon30, id: '{{ iter.job.id }}'}`), engine.StartOptions{}, time.Minute)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "release") || !strings.Contains(sum.Error, "statuz") {
		t.Fatalf("status %s: %s; want failed on the release", sum.Status, sum.Error)
	}
	var status30 string
	if err := db.QueryRow(`SELECT status FROM jobs WHERE id = 30`).Scan(&status30); err != nil {
		t.Fatal(err)
	}
	recorded := false
	for _, ev := range evs {
		if ev.Type == eventlog.TypeFrameDone && strings.Contains(string(ev.Payload), `"abandoned":["30"]`) {
			recorded = true
		}
	}
	st, err := engine.Inspect(context.Background(), log, sum.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	abandoned := -1
	for _, l := range st.Loops {
		abandoned = l.Abandoned
	}
	if status30 != "claimed" || !recorded || abandoned != 1 {
		t.Fatalf("row 30 %s, its frame.done lists it abandoned: %v, loop abandoned %d; want it claimed and on record once", status30, recorded, abandoned)
	}
}
