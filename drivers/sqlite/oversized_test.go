package sqlite_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestOversizedClaimWarnsOnce: a claim written with its own LIMIT rather
// than __frame_max_rows returns more rows than a frame asks for at every
// claim. Its frames run every row claimed (none is stranded claimed), and
// the cursor says so once, not at every claim of the drain.
func TestOversizedClaimWarnsOnce(t *testing.T) {
	h := newHarness(t)
	table := h.createTable(t, 20)
	spec := drivertest.TableQueue{
		Kind:       "sqlite",
		Auth:       "local_db",
		Credential: "sqlite:" + h.path,
		Claim: `UPDATE {{ workload.table }} SET status = 'claimed', attempts = attempts + 1
			WHERE id IN (SELECT id FROM {{ workload.table }} WHERE status = 'pending' ORDER BY id LIMIT 5)
			RETURNING id, payload, attempts`,
		Table: table,
	}.Spec(t, cursortest.QueueOptions{})
	var log testenv.SyncBuffer
	spec.Logger = slog.New(slog.NewTextHandler(&log, nil))
	ctx := t.Context()
	cur, err := h.drv.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var got []string
	for range 4 {
		c, err := cur.Claim(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Rows) != 5 {
			t.Fatalf("claim returned %d rows, want the 5 its LIMIT takes", len(c.Rows))
		}
		if err := c.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		got = append(got, keys(c.Rows)...)
	}
	if len(got) != 20 {
		t.Fatalf("claimed %d rows in 4 claims, want all 20", len(got))
	}
	if n := strings.Count(log.String(), "claim returned more rows than __frame_max_rows"); n != 1 {
		t.Fatalf("warned %d times in 4 oversized claims, want once:\n%s", n, log.String())
	}
}
