package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/drivers/postgres"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// keyTable creates a queue table, dropped when the test ends, with the
// rows given as VALUES (a, b, tenant, payload) and returns its name and
// a pool on the test database.
func keyTable(t *testing.T, ctx context.Context, values string) (string, *pgxpool.Pool) {
	t.Helper()
	base := testenv.Postgres(t)
	db, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	table := "cursorkeys_" + testenv.RandomSuffix(t)
	_, err = db.Exec(ctx, `CREATE TABLE `+table+` (seq serial PRIMARY KEY, a text, b text, tenant text,
		payload text NOT NULL, status text NOT NULL DEFAULT 'pending');
		INSERT INTO `+table+` (a, b, tenant, payload) VALUES `+values)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	return table, db
}

func statuses(t *testing.T, ctx context.Context, db *pgxpool.Pool, table string) []string {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT payload || ':' || status FROM `+table+` ORDER BY seq`)
	return drivertest.Strings(t, rows, err)
}

// TestPlaybookCompositeKeysDoNotCollide drains, a row per frame, a table
// keyed by two text columns whose rows ("a/b", "c") and ("a", "b/c") used
// to get the same key "a/b/c": the engine recorded one key for two rows,
// and an ack by key reached both rows or neither (a row marked done
// without running, or rows left claimed for ever). Every row must get a
// key of its own, run once, and be acked by the ack statement that
// computes keys as drivers/doc.go describes.
func TestPlaybookCompositeKeysDoNotCollide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	table, db := keyTable(t, ctx, `('a/b', 'c', NULL, 'p1'), ('a', 'b/c', NULL, 'p2'), ('x', 'y', NULL, 'p3'),
		('50%', 'off', NULL, 'p4'), ('a%2Fb', 'c', NULL, 'p5'), ('/a%2Fb', 'c', NULL, 'p6')`)
	var bodies drivertest.Bodies
	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/compositekey_drain.yaml",
		Kind:         "postgres",
		Driver:       postgres.New(postgres.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"queue_db": testenv.Postgres(t)}),
		Workload:     map[string]any{"table": table},
		Tools:        map[string]tools.Tool{"body": bodies.Tool()},
	})
	if got, want := bodies.Values("payload"), []any{"p1", "p2", "p3", "p4", "p5", "p6"}; !slices.Equal(got, want) {
		t.Errorf("bodies ran for %v, want each row once: %v", got, want)
	}
	// Keys without "/" are the values joined with "/", as they always were.
	drivertest.ExpectEachOnceOK(t, r.Events, []string{"/a%2Fb/c", "/a/b%2Fc", "x/y", "50%/off", "a%2Fb/c", "/%2Fa%252Fb/c"})
	want := []string{"p1:done", "p2:done", "p3:done", "p4:done", "p5:done", "p6:done"}
	if got := statuses(t, ctx, db, table); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

// TestPlaybookRefusesDuplicateKeys drains a table keyed by column tenant,
// which is not unique, so one claim returns two rows of tenant t1. Their
// outcomes, hand-backs and dead letters would be kept under one key, and
// ack and release, which reach rows by key, settle both rows for
// either: a row that failed was handed back with the other, which then
// ran again though it had succeeded. The claim must be refused instead,
// naming the key and its column, and rolled back, so that no row runs or
// is left claimed.
func TestPlaybookRefusesDuplicateKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	table, db := keyTable(t, ctx, `(NULL, NULL, 't1', 'p1'), (NULL, NULL, 't2', 'p2'), (NULL, NULL, 't1', 'p3')`)
	var bodies drivertest.Bodies
	r := drivertest.Run(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/dupkey_drain.yaml",
		Kind:         "postgres",
		Driver:       postgres.New(postgres.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"queue_db": testenv.Postgres(t)}),
		Workload:     map[string]any{"table": table},
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
	want := []string{"p1:pending", "p2:pending", "p3:pending"}
	if got := statuses(t, ctx, db, table); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v: the refused claim must roll back", got, want)
	}
}

// TestPlaybookBigJSONIntegers drains a table whose jsonb payloads carry
// ids past int64; the body marks the row by its payload's id. The claim's
// jsonb decoded such an id as a float64, so the body of the row with id
// 18446744073709551615 marked the row with id 18446744073709552000 (what
// the float64 prints as) a second time and its own row was never marked.
// Every row must be marked once, by its own body, with its own id, digit
// for digit.
func TestPlaybookBigJSONIntegers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := testenv.PostgresSchema(t)
	testenv.Exec(t, db, `CREATE TABLE jobs (seq serial PRIMARY KEY, payload jsonb NOT NULL,
		status text NOT NULL DEFAULT 'pending', seen numeric, marks int NOT NULL DEFAULT 0);
		INSERT INTO jobs (payload) VALUES ('{"id": 18446744073709551615}'), ('{"id": 18446744073709552000}'),
		('{"id": 123456789012345678901234567890}'), ('{"id": 9223372036854775807}'), ('{"id": 42}')`)
	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/bigid_drain.yaml",
		Kind:         "postgres",
		Driver:       postgres.New(postgres.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"queue_db": db}),
		Workload:     map[string]any{"table": "jobs"},
	})
	drivertest.ExpectEachOnceOK(t, r.Events, []string{"1", "2", "3", "4", "5"})
	var got []string
	testenv.QueryRow(t, db, `SELECT array_agg(payload->>'id' || ' ' || status || ' ' || coalesce(seen::text, 'unmarked') || ' x' || marks ORDER BY seq) FROM jobs`, &got)
	want := []string{
		"18446744073709551615 done 18446744073709551615 x1", "18446744073709552000 done 18446744073709552000 x1",
		"123456789012345678901234567890 done 123456789012345678901234567890 x1",
		"9223372036854775807 done 9223372036854775807 x1", "42 done 42 x1",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows (payload id, status, id the body marked it with, times marked):\n%q\nwant\n%q", got, want)
	}
}
