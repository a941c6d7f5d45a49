package clickhouse_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/clickhouse"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools/builtin"
)

const playbookPath = "../../examples/playbooks/clickhouse_drain.yaml"

// TestPlaybookDrainsTable drains a 10,000-row table through the engine
// with the example playbook, four frames at a time, and checks that every
// row was delivered once and recorded done once.
func TestPlaybookDrainsTable(t *testing.T) {
	const n = 10_000
	dsn := testenv.ClickHouse(t)
	admin, _ := adminConn(t)
	table := "e2e_" + randSuffix(t)
	createQueue(t, admin, table, n)
	src, err := os.ReadFile(playbookPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	creg := cursor.NewRegistry()
	if err := creg.Register("clickhouse", clickhouse.New(clickhouse.Config{})); err != nil {
		t.Fatal(err)
	}
	treg, tclose := builtin.NewRegistry(builtin.Options{})
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Close()
		_ = creg.Close()
		_ = tclose.Close()
	})

	start := time.Now()
	id, err := e.Start(ctx, src, engine.StartOptions{File: playbookPath, Workload: map[string]any{
		"clickhouse_url": dsn, "table": table,
	}})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s %s %s", sum.Status, sum.Step, sum.Field, sum.Error)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	ls := st.Loops["start#1"]
	if ls.Rows != n || ls.OK != n {
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
	t.Logf("drained %d rows in %v (%.0f rows/s), %d frames, %d events (%.4f per row)",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), ls.Frames, st.Events, float64(st.Events)/float64(n))
}
