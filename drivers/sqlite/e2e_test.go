package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/tools"
)

// TestPlaybookRecordsNonFiniteFloats drains a table whose REAL column
// holds Infinity and -Infinity, which JSON cannot hold: every claim must
// still be on record with its rows (a frame re-issued after its worker
// died runs the recorded rows; a claim recorded as an encode error would
// leave its rows claimed for ever), the infinite values as "+Inf" and
// "-Inf", and every row must run once.
func TestPlaybookRecordsNonFiniteFloats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(`CREATE TABLE work (id INTEGER PRIMARY KEY, payload REAL, status TEXT NOT NULL DEFAULT 'pending');
		INSERT INTO work (id, payload) VALUES (1, 1.5), (2, 9e999), (3, -9e999), (4, NULL), (5, 2.5), (6, 9e999), (7, 0)`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/float_drain.yaml",
		Kind:         "sqlite",
		Driver:       sqlite.New(sqlite.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"queue_db": "sqlite:" + path}),
		Workload:     map[string]any{"table": "work"},
	})
	keys := drivertest.SeqKeys(7)
	drivertest.ExpectEachOnceOK(t, r.Events, keys)
	if r.Loop.Rows != 7 || r.Loop.OK != 7 || !r.Loop.Finished {
		t.Fatalf("loop status %+v, want 7 rows ok, finished", r.Loop)
	}

	recorded := map[string]any{}
	for _, ev := range r.Events {
		if ev.Type != eventlog.TypeFrameClaimed {
			continue
		}
		var p struct {
			Rows []struct {
				Key    string         `json:"key"`
				Values map[string]any `json:"values"`
			} `json:"rows"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil || len(p.Rows) == 0 {
			t.Fatalf("frame.claimed %s records no rows (err %v)", ev.Payload, err)
		}
		for _, row := range p.Rows {
			recorded[row.Key] = row.Values["payload"]
		}
	}
	want := map[string]any{"1": 1.5, "2": "+Inf", "3": "-Inf", "4": nil, "5": 2.5, "6": "+Inf", "7": 0.0}
	for k, v := range want {
		if got, ok := recorded[k]; !ok || got != v {
			t.Errorf("row %s recorded payload %#v (recorded: %v), want %#v", k, got, ok, v)
		}
	}

	rows, err := db.QueryContext(ctx, `SELECT CAST(id AS TEXT) FROM work WHERE status = 'done' ORDER BY id`)
	if done := drivertest.Strings(t, rows, err); !slices.Equal(done, keys) {
		t.Fatalf("rows done %v, want 1..7", done)
	}
}

// TestPlaybookRefusesNullKeys drains a table whose key column (key:
// job_id) is NULL in two rows. Such rows have no identity: both used to
// get the key "", so the engine recorded one key for two rows (outcomes,
// hand-back counts, dead letter) and the ack, which names rows by key,
// never reached them: they stayed claimed for ever while the loop
// reported them done. The claim must be refused instead, naming the key
// column, and rolled back, so that no row is left claimed.
func TestPlaybookRefusesNullKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(`CREATE TABLE work (job_id TEXT, payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending');
		INSERT INTO work (job_id, payload) VALUES ('a', 'p1'), (NULL, 'p2'), (NULL, 'p3'), ('b', 'p4')`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	r := drivertest.Run(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/nullkey_drain.yaml",
		Kind:         "sqlite",
		Driver:       sqlite.New(sqlite.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"queue_db": "sqlite:" + path}),
		Workload:     map[string]any{"table": "work"},
	})
	if sum := r.Summary; sum.Status != engine.StatusFailed ||
		!strings.Contains(sum.Error, `key column "job_id"`) || !strings.Contains(sum.Error, "NULL") {
		t.Fatalf("execution %s: %s %s, want failed naming the NULL key column job_id", sum.Status, sum.Step, sum.Error)
	} else {
		t.Log(sum.Error)
	}
	if items := drivertest.FrameItems(t, r.Events); len(items) != 0 {
		t.Fatalf("the engine ran rows %v of a claim with NULL keys", items)
	}
	rows, err := db.QueryContext(ctx, `SELECT payload || ':' || status FROM work ORDER BY rowid`)
	want := []string{"p1:pending", "p2:pending", "p3:pending", "p4:pending"}
	if got := drivertest.Strings(t, rows, err); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v: the refused claim must roll back", got, want)
	}
}
