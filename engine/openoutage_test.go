package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// TestSourceUnreachableAtOpenIsRiddenOut: the source refuses connections
// when a loop's slot opens its cursor (a Redis restarting as the loop
// starts, or as `cursorflow resume` picks an execution up). Opening a
// redisstream cursor creates its consumer group on the server, so the
// refusal comes from Open, not from a claim. It is a failure that may
// pass, tried again as a claim's is: once the server answers the drain
// completes with every entry done, instead of failing the execution for
// good (and, with it, destroying the loop's consumer group with the
// entries it had not run).
func TestSourceUnreachableAtOpenIsRiddenOut(t *testing.T) {
	t.Parallel()
	base := testenv.Redis(t)
	o, err := redis.ParseURL(base)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream := fmt.Sprintf("openoutage-%d", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(context.Background(), stream, stream+":dead") })
	const n = 20
	for i := range n {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"n", i + 1}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	proxy := testenv.NewProxy(t, o.Addr)
	proxy.RefuseNext(1 << 30) // down until the retry is seen
	kc := tools.StaticURLs(map[string]string{"rq": fmt.Sprintf("redis://%s/%d", proxy.Addr(), o.DB)})
	treg, creg, closer := stdwire.Registries(kc, nil, false)
	t.Cleanup(func() { _ = closer.Close() })
	retrying := make(chan struct{})
	logger := slog.New(signalHandler{slog.NewTextHandler(t.Output(), nil), "transient failure; trying again", &sync.Once{}, retrying})
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Tick: 10 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor:
        kind: redisstream
        auth: rq
        stream: `+stream+`
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 2
        frame: {max_rows: 5}
    tool: {kind: noop}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		sum *engine.Summary
		err error
	}
	ended := make(chan result, 1)
	go func() {
		sum, err := e.Wait(ctx, id)
		ended <- result{sum, err}
	}()
	select {
	case <-retrying:
	case r := <-ended:
		t.Fatalf("the execution ended while the source refused connections, without trying again: %v %+v", r.err, r.sum)
	}
	proxy.RefuseNext(0)
	r := <-ended
	if r.err != nil || r.sum == nil || r.sum.Status != engine.StatusCompleted {
		t.Fatalf("%v %+v", r.err, r.sum)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	if ls := st.Loops["start#1"]; ls.Failed != 0 || ls.Done != n {
		t.Fatalf("loop %+v: want %d entries done, none failed", ls, n)
	}
}
