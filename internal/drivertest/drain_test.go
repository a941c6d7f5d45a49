package drivertest_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/tools"
)

// TestDrainSQLite drains a 45-row SQLite table with the sqlite driver,
// which needs no server, and checks what Drain hands back against the
// table itself.
func TestDrainSQLite(t *testing.T) {
	const n = 45
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(`CREATE TABLE work (id INTEGER PRIMARY KEY, payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending');
		WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 45)
		INSERT INTO work (id, payload) SELECT n, 'item ' || n FROM g`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/sqlite_drain.yaml",
		Kind:         "sqlite",
		Driver:       sqlite.New(sqlite.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"queue_db": "sqlite:" + path}),
		Workload:     map[string]any{"table": "work"},
	})
	if r.ExecutionID == "" || r.Summary.ExecutionID != r.ExecutionID || r.Status.ExecutionID != r.ExecutionID {
		t.Fatalf("execution ids: result %q, summary %q, status %q", r.ExecutionID, r.Summary.ExecutionID, r.Status.ExecutionID)
	}
	if r.Loop.Rows != n || r.Loop.OK != n || !r.Loop.Finished || r.Loop.Frames < n/10 {
		t.Fatalf("loop status %+v, want %d rows ok in at least %d frames, finished", r.Loop, n, n/10)
	}
	if int64(len(r.Events)) != r.Status.Events || r.Elapsed <= 0 {
		t.Fatalf("%d events, status counts %d; elapsed %v", len(r.Events), r.Status.Events, r.Elapsed)
	}
	drivertest.ExpectEachOnceOK(t, r.Events, drivertest.SeqKeys(n))

	rows, err := db.QueryContext(ctx, `SELECT CAST(id AS TEXT) FROM work WHERE status = 'done' ORDER BY id`)
	if done := drivertest.Strings(t, rows, err); !slices.Equal(done, drivertest.SeqKeys(n)) {
		t.Fatalf("rows done %v, want 1..%d", done, n)
	}
	// Strings closed the rows: the one connection is free again.
	db.SetMaxOpenConns(1)
	var left int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM work WHERE status != 'done'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows not done (err %v)", left, err)
	}
	r.LogRate(t, n, "rows")
}

func TestFrameItems(t *testing.T) {
	// Every key of every frame.done counts, in order, outcomes included.
	r := drainSmall(t)
	items := drivertest.FrameItems(t, r.Events)
	if len(items) != 3 {
		t.Fatalf("FrameItems = %v, want 3 keys", items)
	}
	for _, k := range drivertest.SeqKeys(3) {
		if got := items[k]; !slices.Equal(got, []string{"ok"}) {
			t.Fatalf("key %s: %v, want [ok]", k, got)
		}
	}
}

// drainSmall drains a 3-row table.
func drainSmall(t *testing.T) drivertest.Result {
	t.Helper()
	path := filepath.Join(t.TempDir(), "small.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending');
		INSERT INTO jobs (id, payload) VALUES (1, 'a'), (2, 'b'), (3, 'c')`); err != nil {
		t.Fatal(err)
	}
	return drivertest.Drain(t.Context(), t, drivertest.DrainConfig{
		PlaybookFile: "testdata/sqlite_drain.yaml",
		Kind:         "sqlite",
		Driver:       sqlite.New(sqlite.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"queue_db": "sqlite:" + path}),
	})
}

func TestSeqKeys(t *testing.T) {
	if got := drivertest.SeqKeys(3); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("SeqKeys(3) = %v", got)
	}
	if got := drivertest.SeqKeys(0); len(got) != 0 {
		t.Fatalf("SeqKeys(0) = %v, want empty", got)
	}
}

func TestStatusOptions(t *testing.T) {
	o := drivertest.StatusOptions("q", 0)
	if len(o) != 1 || o["release"] != `UPDATE q SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(', ') }})` {
		t.Fatalf("StatusOptions(q, 0) = %v", o)
	}
	o = drivertest.StatusOptions("{{ workload.table }}", 3)
	if o["dead_letter"] != `UPDATE {{ workload.table }} SET status = 'dead' WHERE id IN ({{ keys | join(', ') }})` {
		t.Fatalf("StatusOptions with max attempts: %v", o)
	}
}
