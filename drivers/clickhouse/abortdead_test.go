package clickhouse_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/clickhouse"
)

// TestAbortedClaimStillReportsDead: a claim that buried an exhausted
// object and is then aborted (the engine could not record it: the
// process died, or a re-issue superseded the attempt) must not leave the
// object in the dead table unreported: a later claim has to list it.
func TestAbortedClaimStillReportsDead(t *testing.T) {
	h := newHarness(t, clickhouse.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec, names := h.NewQueue(t, 2, cursortest.QueueOptions{MaxAttempts: 1})
	cur, err := h.drv.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	first, err := cur.Claim(ctx, 1)
	if err != nil || len(first.Rows) != 1 {
		t.Fatalf("first claim: %v %v", first, err)
	}
	if err := cur.Release(ctx, first.Rows); err != nil { // its only delivery
		t.Fatal(err)
	}
	second, err := cur.Claim(ctx, 2) // buries first.Rows[0], leases the other
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second claim: rows %v dead %v", rowKeys(second.Rows), rowKeys(second.Dead))
	if err := second.Abort(ctx); err != nil { // the record failed
		t.Fatal(err)
	}
	var later []string
	for range 3 {
		c, err := cur.Claim(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		later = append(later, rowKeys(c.Dead)...)
		if len(c.Rows) > 0 {
			_ = cur.Release(ctx, c.Rows)
		}
	}
	dead := h.DeadLettered(t, spec)
	for _, k := range dead {
		if !slices.Contains(later, k) {
			t.Errorf("object %q is in the dead table (of %v), but no claim after the aborted one listed it dead (later Dead: %v)", k, names, later)
		}
	}
}

func rowKeys(rows []cursor.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Key)
	}
	return out
}
