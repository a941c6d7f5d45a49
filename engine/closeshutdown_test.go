package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// TestCloseDuringShutdown: a host shuts down gracefully on SIGTERM with a
// long deadline, and calls Close on a second signal (or from a deferred
// Close) to stop at once. Close cuts the Shutdown short, cancelling the
// running commands, and returns only once the engine has stopped, so
// that the host may close its pool behind it. It returned at once, doing
// nothing, while Shutdown waited on for its whole deadline.
func TestCloseDuringShutdown(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	returned := make(chan struct{})
	reg := tools.NewRegistry()
	reg.MustRegister("wait", fn.New(func(ctx context.Context, _ *tools.Call) (any, error) {
		defer close(returned)
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	e, err := engine.New(engine.Config{Log: eventlog.NewMemory(), Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.Start(ctx, []byte(header+"workflow:\n  - step: start\n    tool: {kind: wait}\n"), engine.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	<-started
	shut := make(chan error, 1)
	go func() { shut <- e.Shutdown(ctx) }()
	// Close once Shutdown has begun: calls fail with ErrClosed then.
	for {
		if _, err := e.Driving(ctx); errors.Is(err, engine.ErrClosed) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error, 2)
	go func() { closed <- e.Close() }()
	go func() { closed <- e.Close() }()
	for range 2 {
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Close did not return while a Shutdown ran")
		}
		// Close returned: the engine has stopped, its running command
		// cancelled and its tool returned.
		select {
		case <-returned:
		default:
			t.Fatal("Close returned while the command the Shutdown ran was still running")
		}
	}
	// The Shutdown it cut short ends with its context's error. (Whether
	// it has returned by the time Close does is a race between the two
	// callers' goroutines: Close returns once the engine has stopped.)
	select {
	case err := <-shut:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Shutdown cut short by Close: %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Shutdown did not return after Close cut it short")
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close after Close: %v", err)
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown after Close: %v", err)
	}
}
