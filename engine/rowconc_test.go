package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/tools"
)

// TestRowConcurrencyBoundsTheRowsRunningAtOnce: with process: row a
// frame runs row_concurrency rows at once, never more. The first
// row_concurrency rows of the drain are held until the test has seen that
// many running together (a lower bound never gets there) and has looked
// for a further row starting beside them for a while (a higher bound
// starts one at once); then every row runs.
func TestRowConcurrencyBoundsTheRowsRunningAtOnce(t *testing.T) {
	t.Parallel()
	const rows, conc = 40, 3
	db, path := jobsQueue(t, 40)
	var (
		mu                 sync.Mutex
		running, peak, ran int
		reached            = make(chan struct{}) // conc rows run at once
		gate               = make(chan struct{}) // the first conc rows may end
	)
	reg := tools.NewRegistry()
	reg.MustRegister("count", tools.ToolFunc(func(ctx context.Context, _ *tools.Call) (tools.Output, error) {
		mu.Lock()
		running++
		ran++
		n := ran
		peak = max(peak, running)
		if n <= conc && running == conc {
			close(reached)
		}
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		if n <= conc {
			select {
			case <-gate:
			case <-ctx.Done():
				return tools.Output{}, ctx.Err()
			}
		}
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	e, _ := sqliteEngine(t, path, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(jobsPlaybook([]string{jobsAck}, 1, `{max_rows: 20, row_concurrency: 3, process: row}`, `{kind: count}`)), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		mu.Lock()
		p := peak
		mu.Unlock()
		t.Fatalf("at most %d rows ran at once, want %d", p, conc)
	}
	// Look for a row started beyond the bound: a bound above it starts one
	// as soon as it is dispatched. Nothing waits on this window; it is how
	// long the test looks.
	time.Sleep(200 * time.Millisecond)
	close(gate)
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	var done int
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE status = 'done'`).Scan(&done); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran != rows || done != rows || peak != conc {
		t.Fatalf("%d rows ran, %d done, at most %d at once; want %d, %d, %d", ran, done, peak, rows, rows, conc)
	}
}
