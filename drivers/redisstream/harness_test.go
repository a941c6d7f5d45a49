package redisstream_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/redisstream"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// admin connects to the test server.
func admin(t testing.TB) (*redis.Client, string) {
	t.Helper()
	base := testenv.Redis(t)
	o, err := redis.ParseURL(base)
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.EnvRedis, err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("ping: %v", err)
	}
	return c, base
}

// newStream names a stream of its own for the test, prefix then a random
// suffix then ":jobs", and deletes it and its dead-letter stream when the
// test ends.
func newStream(t testing.TB, rdb *redis.Client, prefix string) string {
	t.Helper()
	stream := prefix + testenv.RandomSuffix(t) + ":jobs"
	t.Cleanup(func() { _ = rdb.Del(context.Background(), stream, stream+":dead").Err() })
	return stream
}

// withClientName sets the client name the driver's connections announce.
func withClientName(t testing.TB, base, name string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("client_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// fill adds n entries {n: i, name: "item i"} to stream and returns their
// ids in order.
func fill(t testing.TB, c *redis.Client, stream string, n int) []string {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, 0, n)
	for start := 0; start < n; start += 1000 {
		pipe := c.Pipeline()
		var cmds []*redis.StringCmd
		for i := start; i < min(n, start+1000); i++ {
			cmds = append(cmds, pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"n", i + 1, "name", fmt.Sprintf("item %d", i+1)}}))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("xadd: %v", err)
		}
		for _, cmd := range cmds {
			ids = append(ids, cmd.Val())
		}
	}
	return ids
}

// harness implements cursortest.Harness. Every queue is a stream of its
// own, and its credential carries a client name of its own, so the driver
// keeps a client per queue and DropConnections kills only that client's
// connections.
type harness struct {
	drv    *redisstream.Driver
	admin  *redis.Client
	base   string
	prefix string
	seq    atomic.Int64
	mu     sync.Mutex
	keys   []string
}

func newHarness(t testing.TB, cfg redisstream.Config) *harness {
	t.Helper()
	c, base := admin(t)
	h := &harness{drv: redisstream.New(cfg), admin: c, base: base, prefix: "cursortest_" + testenv.RandomSuffix(t)}
	t.Cleanup(func() {
		_ = h.drv.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.keys) > 0 {
			if err := c.Del(context.Background(), h.keys...).Err(); err != nil {
				t.Errorf("delete streams: %v", err)
			}
		}
	})
	return h
}

func (h *harness) Driver() cursor.Driver { return h.drv }

func (h *harness) NewQueue(t *testing.T, n int, opts cursortest.QueueOptions) (cursor.Spec, []string) {
	t.Helper()
	name := fmt.Sprintf("%s_%d", h.prefix, h.seq.Add(1))
	stream := name + ":jobs"
	h.mu.Lock()
	h.keys = append(h.keys, stream, stream+":dead")
	h.mu.Unlock()
	ids := fill(t, h.admin, stream, n)
	spec := cursor.Spec{
		Kind:        "redisstream",
		Auth:        "redis_test",
		Credential:  withClientName(t, h.base, name),
		Options:     map[string]any{"stream": stream},
		Lease:       opts.Lease,
		MaxAttempts: opts.MaxAttempts,
	}
	return spec, ids
}

// Complete does nothing: an entry is done when the cursor acks it.
func (h *harness) Complete(context.Context, cursor.Spec, []cursor.Row) error { return nil }

func (h *harness) DeadLettered(t *testing.T, spec cursor.Spec) []string {
	t.Helper()
	msgs, err := h.admin.XRange(context.Background(), spec.Options["stream"].(string)+":dead", "-", "+").Result()
	if err != nil {
		t.Fatalf("read dead letter: %v", err)
	}
	keys := make([]string, 0, len(msgs))
	for _, m := range msgs {
		id, _ := m.Values["cursorflow_id"].(string)
		keys = append(keys, id)
	}
	return keys
}

// DropConnections kills the connections of the queue's client name and
// waits until they are gone.
func (h *harness) DropConnections(t *testing.T, spec cursor.Spec) {
	t.Helper()
	u, err := url.Parse(spec.Credential)
	if err != nil {
		t.Fatal(err)
	}
	name := u.Query().Get("client_name")
	ctx := context.Background()
	ids := func() []string {
		list, err := h.admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatalf("client list: %v", err)
		}
		var out []string
		for _, line := range strings.Split(list, "\n") {
			var id string
			match := false
			for _, f := range strings.Fields(line) {
				k, v, _ := strings.Cut(f, "=")
				switch {
				case k == "id":
					id = v
				case k == "name" && v == name:
					match = true
				}
			}
			if match {
				out = append(out, id)
			}
		}
		return out
	}
	victims := ids()
	if len(victims) == 0 {
		t.Fatalf("no connection named %s to kill: the driver holds no connection", name)
	}
	for _, id := range victims {
		if err := h.admin.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
			t.Fatalf("client kill %s: %v", id, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ids()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("connections named %s still alive 10s after CLIENT KILL", name)
		}
		time.Sleep(20 * time.Millisecond) // polling the server with a deadline
	}
}

// ClaimAndDie claims and then has the server drop the claimer's
// connections, as a process death would.
func (h *harness) ClaimAndDie(t *testing.T, spec cursor.Spec, max int) []string {
	return cursortest.ClaimAndDropConnections(t, h, spec, max)
}
