package postgres_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

const benchFrame = 100

// benchClaim drains a queue of b.N frames of 100 rows with claimers
// concurrent cursors running the canonical SKIP LOCKED claim, and reports
// claimed rows per second.
func benchClaim(b *testing.B, claimers int) {
	h := newHarness(b, postgres.Config{})
	table := h.createTable(b, b.N*benchFrame)
	if _, err := h.admin.Exec(context.Background(), "ANALYZE "+table); err != nil {
		b.Fatal(err)
	}
	spec := cursor.Spec{Kind: "postgres", Credential: testenv.WithAppName(h.base, "bench"), Claim: mustTemplate(b, claimSQL),
		Scope: map[string]any{"workload": map[string]any{"table": table}}}
	curs := make([]cursor.Cursor, claimers)
	for i := range curs {
		spec.SlotID = i
		cur, err := h.drv.Open(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		defer cur.Close()
		curs[i] = cur
	}
	var rows atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, cur := range curs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := cursortest.ClaimCommitted(context.Background(), cur, benchFrame)
				if err != nil {
					b.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				rows.Add(int64(len(got)))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if got := rows.Load(); got != int64(b.N*benchFrame) {
		b.Fatalf("claimed %d rows, want %d", got, b.N*benchFrame)
	}
	b.ReportMetric(float64(rows.Load())/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkClaim: one claimer, frames of 100 rows.
func BenchmarkClaim(b *testing.B) { benchClaim(b, 1) }

// BenchmarkClaim4: four claimers (max_in_flight: 4), frames of 100 rows.
func BenchmarkClaim4(b *testing.B) { benchClaim(b, 4) }
