package clickhouse_test

import (
	"context"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/clickhouse"
	"github.com/cursorflow/cursorflow/drivers/internal/deadtest"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestClaimReportsDead: the row released with its last allowed delivery
// is moved to the dead table by the next claim, which lists it in
// Claim.Dead; the engine learns of it from nothing else.
func TestClaimReportsDead(t *testing.T) {
	h := newHarness(t, clickhouse.Config{})
	spec, keys := h.NewQueue(t, 2, cursortest.QueueOptions{MaxAttempts: 2})
	// Claim in key order, so that claims of one row take the first.
	spec.Options["order_by"] = "id"
	// Lease.Attempt counts the claims kept; burying is not one.
	deadtest.ExpectClaimDead(t, h.drv, spec, keys, func(ran int) int { return ran },
		func() []string { return h.DeadLettered(t, spec) })
}

// TestPlaybookCountsDeadRows drains rows whose body fails for every 50th
// (deadtest.Drain): each of those fails max_attempts times and is then
// moved to the dead table by the next claim, which the loop must count as
// dead, one row each.
func TestPlaybookCountsDeadRows(t *testing.T) {
	dsn := testenv.ClickHouse(t)
	h := newHarness(t, clickhouse.Config{})
	table := "e2e_dead_" + testenv.RandomSuffix(t)
	createQueue(t, h.admin, table, deadtest.Rows)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	spec := cursor.Spec{Options: map[string]any{"table": table}} // what DeadLettered reads
	deadtest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/dead_drain.yaml",
		Kind:         "clickhouse",
		Driver:       clickhouse.New(clickhouse.Config{}),
		Workload:     map[string]any{"clickhouse_url": dsn, "table": table},
	}, drivertest.SeqKeys(deadtest.Rows), func() []string { return h.DeadLettered(t, spec) })
}
