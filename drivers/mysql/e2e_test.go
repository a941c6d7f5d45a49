package mysql_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/drivers/mysql"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

const playbookFile = "../../examples/playbooks/mysql_drain.yaml"

// TestPlaybookDrains runs examples/playbooks/mysql_drain.yaml through
// the engine against a 10,000-row table with 4 frame slots and checks
// that every row was processed exactly once.
func TestPlaybookDrains(t *testing.T) {
	const n = 10000
	db, base := admin(t)
	table := "e2e_jobs_" + testenv.RandomSuffix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (
		id bigint PRIMARY KEY, payload bigint NOT NULL,
		status varchar(16) NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0,
		claimed_at datetime(6) NULL, result bigint NULL, done_count int NOT NULL DEFAULT 0,
		KEY status_id (status, id))`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })
	for start := 1; start <= n; start += 1000 {
		vals := make([]string, 0, 1000)
		for id := start; id < start+1000 && id <= n; id++ {
			vals = append(vals, fmt.Sprintf("(%d, %d)", id, id+7))
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO `+table+` (id, payload) VALUES `+strings.Join(vals, ",")); err != nil {
			t.Fatal(err)
		}
	}

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: playbookFile,
		Kind:         "mysql",
		Driver:       mysql.New(mysql.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"mysql_queue": base.FormatDSN()}),
		Workload:     map[string]any{"table": table},
	})

	// The source: every row done, acked once, with the body's result.
	var done, once, maxDone int
	err = db.QueryRowContext(ctx, `SELECT
		COALESCE(SUM(status = 'done' AND result = payload * 2), 0),
		COALESCE(SUM(done_count = 1), 0), COALESCE(MAX(done_count), 0) FROM `+table).Scan(&done, &once, &maxDone)
	if err != nil {
		t.Fatal(err)
	}
	if done != n || once != n || maxDone != 1 {
		t.Fatalf("rows done %d, acked once %d, max acks %d; want %d, %d, 1", done, once, maxDone, n, n)
	}
	// The engine: every key ran through the body once, successfully.
	drivertest.ExpectEachOnceOK(t, r.Events, drivertest.SeqKeys(n))
	if ls := r.Loop; ls.OK != n || !ls.Finished {
		t.Fatalf("loop status %+v, want %d rows ok and finished", ls, n)
	}
	r.LogRate(t, n, "rows")
}

// TestPlaybookRefusesDuplicateKeys drains a table keyed by column tenant,
// which is not unique, so one claim returns two rows of tenant t1. Their
// outcomes, hand-backs and dead letters would be kept under one key, and
// ack and release, which reach rows by key, settle both rows for either.
// The claim must be refused instead, naming the key and its column, and
// rolled back with its mark, so that no row runs or is left claimed.
func TestPlaybookRefusesDuplicateKeys(t *testing.T) {
	db, base := admin(t)
	table := "e2e_dupkey_" + testenv.RandomSuffix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (seq int PRIMARY KEY, tenant varchar(16) NOT NULL,
		payload varchar(16) NOT NULL, status varchar(16) NOT NULL DEFAULT 'pending')`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })
	if _, err := db.ExecContext(ctx, `INSERT INTO `+table+` (seq, tenant, payload)
		VALUES (1, 't1', 'p1'), (2, 't2', 'p2'), (3, 't1', 'p3')`); err != nil {
		t.Fatal(err)
	}
	var bodies drivertest.Bodies
	r := drivertest.Run(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/dupkey_drain.yaml",
		Kind:         "mysql",
		Driver:       mysql.New(mysql.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"mysql_queue": base.FormatDSN()}),
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
	rows, err := db.QueryContext(ctx, `SELECT CONCAT(payload, ':', status) FROM `+table+` ORDER BY seq`)
	want := []string{"p1:pending", "p2:pending", "p3:pending"}
	if got := drivertest.Strings(t, rows, err); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v: the refused claim must roll back", got, want)
	}
}
