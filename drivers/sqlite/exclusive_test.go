package sqlite_test

import (
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/internal/drivertest"
)

// TestClaimsAreExclusive: the driver says its claims are exclusive
// (cursor.Features.ExclusiveClaim), which lets the engine take a claim
// that finds nothing as the end of the source even right after a lost
// attempt. That is only true if no claim can find nothing while another
// claimer holds rows uncommitted: here a
// stalled claimer (another connection, every row claimed, its
// transaction open) makes the claim wait for the write lock and fail,
// never return an empty claim; once the stalled transaction ends, the
// claim gets the rows.
func TestClaimsAreExclusive(t *testing.T) {
	h := newHarness(t)
	spec, _ := h.NewQueue(t, 4, cursortest.QueueOptions{})
	table := drivertest.TableOf(spec)
	drv := sqlite.New(sqlite.Config{BusyTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = drv.Close() })
	if !drv.Features().ExclusiveClaim {
		t.Fatal("the driver does not say its claims are exclusive")
	}
	ctx := t.Context()
	cur, err := drv.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()

	stalled, err := h.db.BeginTx(ctx, nil) // IMMEDIATE: the harness's DSN
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stalled.ExecContext(ctx, `UPDATE `+table+` SET status = 'claimed'`); err != nil {
		t.Fatal(err)
	}
	if c, err := cur.Claim(ctx, 10); err == nil {
		_ = c.Abort(ctx)
		t.Fatalf("claim while another claimer holds every row: %d rows, no error; want it refused (the write lock)", len(c.Rows))
	}
	if err := stalled.Rollback(); err != nil {
		t.Fatal(err)
	}

	c, err := cur.Claim(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) != 4 {
		t.Fatalf("claim after the stalled claimer ended: %d rows, want the 4", len(c.Rows))
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
