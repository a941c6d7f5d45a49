package natsconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/natsconsumer"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// admin connects to the test server.
func admin(t testing.TB) (*nats.Conn, jetstream.JetStream, string) {
	t.Helper()
	base := testenv.NATS(t)
	nc, err := nats.Connect(base)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, base
}

// harness implements cursortest.Harness. Every queue is a stream of its
// own (plus a dead-letter stream), reached through a proxy of its own, so
// the driver keeps a connection per queue and DropConnections cuts only
// that one.
type harness struct {
	drv    *natsconsumer.Driver
	js     jetstream.JetStream
	host   string
	prefix string
	seq    atomic.Int64
	mu     sync.Mutex
	// proxies maps a queue's stream to its proxy, which NATS needs: it
	// has no way to kick a client without a system account.
	proxies map[string]*testenv.Proxy
}

func newHarness(t testing.TB, cfg natsconsumer.Config) *harness {
	t.Helper()
	_, js, base := admin(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{drv: natsconsumer.New(cfg), js: js, host: u.Host, prefix: "CT_" + testenv.RandomSuffix(t), proxies: map[string]*testenv.Proxy{}}
	t.Cleanup(func() { _ = h.drv.Close() })
	return h
}

func (h *harness) Driver() cursor.Driver { return h.drv }

// newStreams creates stream NAME on subjects NAME.jobs and NAME.other
// with n messages on NAME.jobs
// {"n": i, "name": "item i"} and its dead letter NAME_DEAD on NAME.dead,
// deleted after the test. It returns the messages' sequences.
func newStreams(t testing.TB, js jetstream.JetStream, name string, n int) []string {
	t.Helper()
	ctx := context.Background()
	for _, cfg := range []jetstream.StreamConfig{
		{Name: name, Subjects: []string{name + ".jobs", name + ".other"}, Storage: jetstream.MemoryStorage},
		{Name: name + "_DEAD", Subjects: []string{name + ".dead"}, Storage: jetstream.MemoryStorage},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("create stream %s: %v", cfg.Name, err)
		}
		t.Cleanup(func() {
			if err := js.DeleteStream(context.Background(), cfg.Name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("delete stream %s: %v", cfg.Name, err)
			}
		})
	}
	futures := make([]jetstream.PubAckFuture, n)
	for i := range n {
		f, err := js.PublishAsync(name+".jobs", fmt.Appendf(nil, `{"n": %d, "name": "item %d"}`, i+1, i+1))
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		futures[i] = f
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishing timed out")
	}
	seqs := make([]string, n)
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			seqs[i] = strconv.FormatUint(ack.Sequence, 10)
		case err := <-f.Err():
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	return seqs
}

func (h *harness) NewQueue(t *testing.T, n int, opts cursortest.QueueOptions) (cursor.Spec, []string) {
	t.Helper()
	name := fmt.Sprintf("%s_%d", h.prefix, h.seq.Add(1))
	seqs := newStreams(t, h.js, name, n)
	p := testenv.NewProxy(t, h.host)
	h.mu.Lock()
	h.proxies[name] = p
	h.mu.Unlock()
	spec := cursor.Spec{
		Kind:       "natsconsumer",
		Auth:       "nats_test",
		Credential: "nats://" + p.Addr(),
		Options: map[string]any{
			"stream":              name,
			"dead_letter_subject": name + ".dead",
		},
		Lease:       opts.Lease,
		MaxAttempts: opts.MaxAttempts,
	}
	return spec, seqs
}

// Complete does nothing: a message is done when the cursor acks it.
func (h *harness) Complete(context.Context, cursor.Spec, []cursor.Row) error { return nil }

// deadLettered reads the source sequences in a dead-letter stream.
func deadLettered(t testing.TB, js jetstream.JetStream, stream string) []string {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("dead-letter stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get dead letter %d: %v", seq, err)
		}
		keys = append(keys, m.Header.Get(natsconsumer.HeaderSequence))
	}
	return keys
}

func (h *harness) DeadLettered(t *testing.T, spec cursor.Spec) []string {
	t.Helper()
	return deadLettered(t, h.js, spec.Options["stream"].(string)+"_DEAD")
}

// DropConnections cuts the queue's proxied connections.
func (h *harness) DropConnections(t *testing.T, spec cursor.Spec) {
	t.Helper()
	name := spec.Options["stream"].(string)
	h.mu.Lock()
	p := h.proxies[name]
	h.mu.Unlock()
	if n := p.DropConnections(); n == 0 {
		t.Fatalf("no connection through the proxy of %s: the driver holds no connection", name)
	}
	if !strings.HasPrefix(spec.Credential, "nats://") {
		t.Fatalf("credential %q does not go through the proxy", spec.Credential)
	}
}

// ClaimAndDie claims and then has the server drop the claimer's
// connections, as a process death would.
func (h *harness) ClaimAndDie(t *testing.T, spec cursor.Spec, max int) []string {
	return cursortest.ClaimAndDropConnections(t, h, spec, max)
}
