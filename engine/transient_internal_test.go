package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/cursor"
)

// TestRetryTransientIsBounded: a cursor operation failing transiently is
// tried again with backoff for transientBudget and then given up (its last
// error returned), on the worker's clock; one failing otherwise (a broken
// statement) is not tried again; a cancel stops the retries.
func TestRetryTransientIsBounded(t *testing.T) {
	t.Parallel()
	outage := cursor.MarkTransient(errors.New("connection refused"))
	newWorker := func() (*Worker, *clock.Fake) {
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		return &Worker{Clock: clk, Logger: slog.New(slog.DiscardHandler)}, clk
	}
	cmd := &Command{ID: "start#1/s0.f1@1", Step: "start"}

	t.Run("outage past the budget", func(t *testing.T) {
		t.Parallel()
		w, clk := newWorker()
		calls := 0
		done, finished := make(chan error, 1), make(chan struct{})
		go func() {
			done <- w.retryTransient(context.Background(), cmd, "claim", nil, func(context.Context) error { calls++; return outage })
			close(finished)
		}()
		start := clk.Now()
		for {
			select {
			case err := <-done:
				if !errors.Is(err, outage) {
					t.Fatalf("gave up with %v, want the last transient error", err)
				}
				if took := clk.Now().Sub(start); took > transientBudget || took < transientBudget-2*transientMax {
					t.Fatalf("gave up after %s of clock time, want about %s", took, transientBudget)
				}
				if calls < 10 || calls > 30 {
					t.Fatalf("%d calls in the budget: the backoff is off", calls)
				}
				return
			default:
			}
			if clk.WaitForWaiters(1, finished) {
				clk.Advance(transientMax)
			}
		}
	})
	t.Run("broken statement", func(t *testing.T) {
		t.Parallel()
		w, _ := newWorker()
		calls := 0
		syntax := fmt.Errorf("claim: %w", errors.New("syntax error at or near SELEC"))
		if err := w.retryTransient(context.Background(), cmd, "claim", nil, func(context.Context) error { calls++; return syntax }); !errors.Is(err, syntax) || calls != 1 {
			t.Fatalf("%v after %d calls, want the error at once", err, calls)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		w, _ := newWorker()
		cancelled := make(chan struct{})
		close(cancelled)
		calls := 0
		if err := w.retryTransient(context.Background(), cmd, "claim", cancelled, func(context.Context) error { calls++; return outage }); !errors.Is(err, outage) || calls != 1 {
			t.Fatalf("%v after %d calls, want no retry once cancelled", err, calls)
		}
	})
}
