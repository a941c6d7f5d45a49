package engine

import (
	"context"
	"testing"
	"time"
)

// TestLocalQueueDropsSupersededAttempts: with every in-process worker
// busy, a queued command's lease runs out and the engine re-issues it,
// uncounted, once per lease; the attempts still queued behind are
// superseded. A worker that frees up runs the current attempt only, once,
// and the other commands in their order.
func TestLocalQueueDropsSupersededAttempts(t *testing.T) {
	t.Parallel()
	q := newLocalQueue()
	cmd := func(exec, base string, attempt int) *Command {
		return &Command{ExecutionID: exec, Base: base, Attempt: attempt, ID: commandID(base, attempt)}
	}
	for _, c := range []*Command{
		cmd("x", "f", 1), cmd("x", "g", 1), cmd("x", "f", 2), cmd("y", "f", 1), cmd("x", "f", 3),
	} {
		q.Dispatch(c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []string
	for range 3 {
		c, ok := q.next(ctx)
		if !ok {
			t.Fatalf("queue ended after %v", got)
		}
		got = append(got, c.ExecutionID+":"+c.ID)
	}
	want := []string{"x:g@1", "y:f@1", "x:f@3"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("workers took %v, want %v", got, want)
		}
	}
	if len(q.items) != 0 || len(q.latest) != 0 {
		t.Fatalf("left %d queued, %d attempts tracked", len(q.items), len(q.latest))
	}
	// An attempt sent again after it was taken (a reload) runs again.
	q.Dispatch(cmd("x", "f", 3))
	if c, ok := q.next(ctx); !ok || c.ID != "f@3" {
		t.Fatalf("took %v %v, want f@3 again", c, ok)
	}
}
