package engine

import (
	"context"
	"errors"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/clock"
)

// goroutinesCreated is the process's count of goroutines created so far.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A claim's driver derives contexts from the claim's (a timeout, its
// connection's watch): each is ended with the claim's context, and none
// costs a goroutine waiting on it. A cancel that comes during the claim
// ends them all; functions registered with AfterFunc run once, those
// stopped first do not.
func TestClaimContextEndsWhatIsDerivedFromIt(t *testing.T) {
	cancelled := make(chan struct{})
	ran := make(chan string, 4)
	var derived []context.Context
	var stopped, stopLate func() bool
	end := watchClaim(t.Context(), clock.System(), cancelled, time.Hour, func(cctx context.Context) {
		before := goroutinesCreated()
		for range 20 {
			ctx, cancel := context.WithTimeout(cctx, time.Hour)
			defer cancel()
			derived = append(derived, ctx)
		}
		if n := goroutinesCreated() - before; n != 0 {
			t.Errorf("20 contexts derived from the claim's started %d goroutines; want none", n)
		}
		stopped = context.AfterFunc(cctx, func() { ran <- "stopped" })
		stopLate = context.AfterFunc(cctx, func() { ran <- "late" })
		if !stopped() {
			t.Error("stop before the claim's context ended reported that it did not stop the function")
		}
		close(cancelled)
		for i, ctx := range derived {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("context %d derived from the claim's did not end with the cancel", i)
			}
			if !errors.Is(ctx.Err(), context.Canceled) {
				t.Fatalf("context %d ended with %v; want context.Canceled", i, ctx.Err())
			}
		}
		if got := <-ran; got != "late" {
			t.Fatalf("after the cancel %q ran; want the function not stopped", got)
		}
		if stopLate() {
			t.Error("stop after the function ran reported that it stopped it")
		}
		// Registered once the context has ended, a function runs at once.
		context.AfterFunc(cctx, func() { ran <- "after end" })
		if got := <-ran; got != "after end" {
			t.Fatalf("%q ran; want the function registered after the end", got)
		}
	})
	if end != claimCancelled {
		t.Fatalf("watchClaim reported %v; want claimCancelled", end)
	}
	select {
	case got := <-ran:
		t.Fatalf("%q ran too", got)
	default:
	}
}
