package postgres

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// Close does not wait on a round stuck on a server that stopped
// answering: it cuts the round short and sends its notifications once
// more, bounded, in the last round.
func TestNotifierCloseCutsAStuckRound(t *testing.T) {
	t.Parallel()
	stuck := make(chan struct{})
	var sent [][]string
	send := func(ctx context.Context, ids []string) error {
		if len(sent) == 0 && stuck != nil {
			close(stuck)
			stuck = nil
			<-ctx.Done() // a server that does not answer
			sent = append(sent, nil)
			return ctx.Err()
		}
		sent = append(sent, ids)
		return nil
	}
	n := newNotifier(time.Hour, slog.New(slog.DiscardHandler), send)
	waiting := stuck
	n.add("b", "a")
	<-waiting
	closed := make(chan struct{})
	go func() {
		n.close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("close waited on the stuck round")
	}
	// sent is read after close returned: run has ended.
	if len(sent) != 2 || !slices.Equal(sent[1], []string{"a", "b"}) {
		t.Fatalf("rounds sent %q, want the stuck one, then a and b again in the last", sent)
	}
	n.add("c") // after close: dropped, no goroutine started
}

// A notifier closed before any append stops at once.
func TestNotifierCloseUnused(t *testing.T) {
	t.Parallel()
	n := newNotifier(time.Hour, slog.New(slog.DiscardHandler), func(context.Context, []string) error {
		t.Error("sent with nothing appended")
		return nil
	})
	n.close()
	n.add("a")
}
