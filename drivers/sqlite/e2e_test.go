package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
	"github.com/cursorflow/cursorflow/tools"
)

// TestPlaybookRecordsNonFiniteFloats drains a table whose REAL column
// holds Infinity and -Infinity, which JSON cannot hold: every claim must
// still be on record with its rows (a frame re-issued after its worker
// died runs the recorded rows; a claim recorded as an encode error would
// leave its rows claimed for ever), the infinite values as "+Inf" and
// "-Inf", and every row must run once.
func TestPlaybookRecordsNonFiniteFloats(t *testing.T) {
	db, path := sqlitetest.Queue(t, `CREATE TABLE work (id INTEGER PRIMARY KEY, payload REAL, status TEXT NOT NULL DEFAULT 'pending');
		INSERT INTO work (id, payload) VALUES (1, 1.5), (2, 9e999), (3, -9e999), (4, NULL), (5, 2.5), (6, 9e999), (7, 0)`)
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
	db, path := sqlitetest.Queue(t, `CREATE TABLE work (job_id TEXT, payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending');
		INSERT INTO work (job_id, payload) VALUES ('a', 'p1'), (NULL, 'p2'), (NULL, 'p3'), ('b', 'p4')`)
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

// keyTable creates table work with the rows given as VALUES (a, b,
// tenant, payload) in a new SQLite database and returns the database and
// its path.
func keyTable(t *testing.T, values string) (*sql.DB, string) {
	t.Helper()
	return sqlitetest.Queue(t, `CREATE TABLE work (seq INTEGER PRIMARY KEY, a TEXT, b TEXT, tenant TEXT,
		payload TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending');
		INSERT INTO work (a, b, tenant, payload) VALUES `+values)
}

// TestPlaybookCompositeKeysDoNotCollide drains, a row per frame, a table
// keyed by two text columns whose rows ("a/b", "c") and ("a", "b/c") used
// to get the same key "a/b/c": the engine recorded one key for two rows,
// and an ack by key reached both rows or neither (a row marked done
// without running, or rows left claimed for ever). Every row must get a
// key of its own, run once, and be acked by the ack statement that
// computes keys as drivers/doc.go describes.
func TestPlaybookCompositeKeysDoNotCollide(t *testing.T) {
	db, path := keyTable(t, `('a/b', 'c', NULL, 'p1'), ('a', 'b/c', NULL, 'p2'), ('x', 'y', NULL, 'p3'),
		('50%', 'off', NULL, 'p4'), ('a%2Fb', 'c', NULL, 'p5'), ('/a%2Fb', 'c', NULL, 'p6')`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var bodies drivertest.Bodies
	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/compositekey_drain.yaml",
		Kind:         "sqlite",
		Driver:       sqlite.New(sqlite.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"queue_db": "sqlite:" + path}),
		Workload:     map[string]any{"table": "work"},
		Tools:        map[string]tools.Tool{"body": bodies.Tool()},
	})
	if got, want := bodies.Values("payload"), []any{"p1", "p2", "p3", "p4", "p5", "p6"}; !slices.Equal(got, want) {
		t.Errorf("bodies ran for %v, want each row once: %v", got, want)
	}
	// Keys without "/" are the values joined with "/", as they always were.
	drivertest.ExpectEachOnceOK(t, r.Events, []string{"/a%2Fb/c", "/a/b%2Fc", "x/y", "50%/off", "a%2Fb/c", "/%2Fa%252Fb/c"})
	rows, err := db.QueryContext(ctx, `SELECT payload || ':' || status FROM work ORDER BY seq`)
	want := []string{"p1:done", "p2:done", "p3:done", "p4:done", "p5:done", "p6:done"}
	if got := drivertest.Strings(t, rows, err); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

// TestPlaybookRefusesDuplicateKeys drains a table keyed by column tenant,
// which is not unique, so one claim returns two rows of tenant t1. Their
// outcomes, hand-backs and dead letters would be kept under one key, and
// ack and release, which reach rows by key, settle both rows for either:
// a row that failed was handed back with the other, which then ran again
// though it had succeeded. The claim must be refused instead, naming the
// key and its column, and rolled back, so that no row runs or is left
// claimed.
func TestPlaybookRefusesDuplicateKeys(t *testing.T) {
	db, path := keyTable(t, `(NULL, NULL, 't1', 'p1'), (NULL, NULL, 't2', 'p2'), (NULL, NULL, 't1', 'p3')`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var bodies drivertest.Bodies
	r := drivertest.Run(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/dupkey_drain.yaml",
		Kind:         "sqlite",
		Driver:       sqlite.New(sqlite.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"queue_db": "sqlite:" + path}),
		Workload:     map[string]any{"table": "work"},
		Tools:        map[string]tools.Tool{"body": bodies.FailingTool("payload", "p1")},
	})
	if sum := r.Summary; sum.Status != engine.StatusFailed ||
		!strings.Contains(sum.Error, `key "t1"`) || !strings.Contains(sum.Error, `"tenant"`) {
		t.Errorf("execution %s: %s %s, want failed naming key t1 and key column tenant", sum.Status, sum.Step, sum.Error)
	} else {
		t.Log(sum.Error)
	}
	if got := bodies.Values("payload"); len(got) != 0 {
		t.Errorf("bodies ran for %v of a claim with a duplicate key", got)
	}
	rows, err := db.QueryContext(ctx, `SELECT payload || ':' || status FROM work ORDER BY seq`)
	want := []string{"p1:pending", "p2:pending", "p3:pending"}
	if got := drivertest.Strings(t, rows, err); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v: the refused claim must roll back", got, want)
	}
}
