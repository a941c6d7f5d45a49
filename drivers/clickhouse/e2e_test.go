package clickhouse_test

import (
	"context"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/drivers/clickhouse"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

const playbookPath = "../../examples/playbooks/clickhouse_drain.yaml"

// TestPlaybookDrainsTable drains a 10,000-row table through the engine
// with the example playbook, four frames at a time, and checks that every
// row was delivered once and recorded done once.
func TestPlaybookDrainsTable(t *testing.T) {
	const n = 10_000
	dsn := testenv.ClickHouse(t)
	admin, _ := adminConn(t)
	table := "e2e_" + testenv.RandomSuffix(t)
	createQueue(t, admin, table, n)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: playbookPath,
		Kind:         "clickhouse",
		Driver:       clickhouse.New(clickhouse.Config{}),
		Workload:     map[string]any{"clickhouse_url": dsn, "table": table},
	})
	if ls := r.Loop; ls.Rows != n || ls.OK != n {
		t.Fatalf("loop status %+v, want %d rows, all ok", ls, n)
	}
	var done, doneRecords, won uint64
	row := admin.QueryRow(ctx, `SELECT uniqExact(key), count() FROM `+table+`_done`)
	if err := row.Scan(&done, &doneRecords); err != nil {
		t.Fatal(err)
	}
	// Every row was won by exactly one claim: winning claims are those
	// not withdrawn.
	row = admin.QueryRow(ctx, `SELECT count() FROM `+table+`_claims WHERE kind = 'claim'
		AND (key, token) NOT IN (SELECT key, token FROM `+table+`_claims WHERE kind = 'withdraw')`)
	if err := row.Scan(&won); err != nil {
		t.Fatal(err)
	}
	if done != n || doneRecords != n || won != n {
		t.Fatalf("%d keys done (%d records), %d winning claims; want %d each", done, doneRecords, won, n)
	}
	r.LogRate(t, n, "rows")
}
