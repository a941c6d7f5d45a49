package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// TestAbortPassesThePolicy: a host function that returns fn.Abort fails
// its step at once, as fn documents: a retry rule that would retry any
// error does not see it. A plain error is retried.
func TestAbortPassesThePolicy(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err   error
		calls int32
	}{
		"abort": {fn.Abort(errors.New("cannot go on")), 1},
		"error": {errors.New("cannot go on"), 3},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			reg := tools.NewRegistry()
			reg.MustRegister("f", fn.New(func(context.Context, *tools.Call) (any, error) {
				calls.Add(1)
				return nil, tc.err
			}))
			e, err := engine.New(engine.Config{Log: eventlog.NewMemory(), Tools: reg})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: f}
    spec:
      policy:
        rules:
          - when: '{{ output.status == "error" }}'
            then: {do: retry, attempts: 3, delay: 0}
`), engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sum, err := e.Wait(ctx, id)
			if err != nil || sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "cannot go on") || calls.Load() != tc.calls {
				t.Fatalf("%v %+v after %d calls; want failed after %d", err, sum, calls.Load(), tc.calls)
			}
		})
	}
}
