package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
)

// TestRemoteStatusOfCancelledLoop: a parallel loop (max_in_flight 3) of
// items that wait is cancelled with `cursorflow cancel` while three of
// them run. status said "3/6 done (3 failed)" for the items the cancel
// stopped; it says they were cancelled, and none done or failed.
func TestRemoteStatusOfCancelledLoop(t *testing.T) {
	t.Parallel()
	r := startRemote(t)
	srv := []string{"--server", r.URL(), "--token", remoteToken}
	id, err := r.Engine.Start(context.Background(), []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: gatedloop}
workflow:
  - step: start
    loop:
      in: [1, 2, 3, 4, 5, 6]
      iterator: it
      spec: {mode: parallel, max_in_flight: 3}
    tool: {kind: gate}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		st, err := engine.Inspect(ctx, r.Log, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.InFlight) == 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("three items never ran: %+v", st)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if code, out, errOut := cli(append([]string{"cancel", id}, srv...)...); code != exitOK {
		t.Fatalf("cancel: %d %q %q", code, out, errOut)
	}
	if sum, err := r.Engine.Wait(ctx, id); err != nil || sum.Status != engine.StatusCancelled {
		t.Fatalf("Wait = %+v, %v; want cancelled", sum, err)
	}
	code, out, errOut := cli(append([]string{"status", id}, srv...)...)
	if code != exitOK || !strings.Contains(out, "parallel finished: 0/6 done (3 cancelled), in flight 0") || strings.Contains(out, "failed") {
		t.Fatalf("status: %d %q %q; want the loop's 3 stopped items cancelled, none failed", code, out, errOut)
	}
}
