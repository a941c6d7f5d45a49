package s3prefix_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/s3prefix"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// harness implements cursortest.Harness. Each queue is a prefix of its
// own (root/pending/, root/done/, ...) in one bucket. Against S3 every
// queue also gets its own TCP proxy in front of the server, hence its own
// bucket URL and connections, so DropConnections hits one queue only.
type harness struct {
	drv   *s3prefix.Driver
	admin *blob.Bucket
	root  string
	base  *url.URL // nil for memblob
	seq   atomic.Int64
	mu    sync.Mutex
	prox  map[string]*testenv.Proxy // credential → proxy
}

// newS3Harness works on the S3 server of CURSORFLOW_TEST_S3 (versitygw).
func newS3Harness(t testing.TB, cfg s3prefix.Config) *harness {
	t.Helper()
	raw := testenv.S3(t)
	base, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.EnvS3, err)
	}
	admin, err := blob.OpenBucket(context.Background(), raw)
	if err != nil {
		t.Fatalf("open bucket: %v", err)
	}
	h := &harness{drv: s3prefix.New(cfg), admin: admin, base: base,
		root: "cursortest-" + testenv.RandomSuffix(t) + "/", prox: make(map[string]*testenv.Proxy)}
	t.Cleanup(func() {
		_ = h.drv.Close()
		if err := deleteAll(context.Background(), admin, h.root); err != nil {
			t.Errorf("clean up %s: %v", h.root, err)
		}
		_ = admin.Close()
	})
	return h
}

// newMemHarness works on one in-process memblob bucket, handed to the
// driver through Config.OpenBucket: the embedded case.
func newMemHarness(t testing.TB, cfg s3prefix.Config) *harness {
	t.Helper()
	mem := memblob.OpenBucket(nil)
	cfg.OpenBucket = func(_ context.Context, u string) (*blob.Bucket, error) {
		if u != "mem://cursortest" {
			return nil, fmt.Errorf("unexpected bucket %q", u)
		}
		return mem, nil
	}
	h := &harness{drv: s3prefix.New(cfg), admin: mem, root: "cursortest/"}
	t.Cleanup(func() { _ = h.drv.Close() })
	return h
}

func deleteAll(ctx context.Context, b *blob.Bucket, prefix string) error {
	it := b.List(&blob.ListOptions{Prefix: prefix})
	var keys []string
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		keys = append(keys, obj.Key)
	}
	return forEach(len(keys), 32, func(i int) error { return b.Delete(ctx, keys[i]) })
}

// forEach runs fn(0..n-1), conc at a time, and joins the errors.
func forEach(n, conc int, fn func(i int) error) error {
	sem := make(chan struct{}, conc)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (h *harness) Driver() cursor.Driver { return h.drv }

// credential returns the bucket URL for a new queue: against S3, the
// server's URL with the endpoint pointing at a fresh proxy.
func (h *harness) credential(t testing.TB) string {
	if h.base == nil {
		return "mem://cursortest"
	}
	q := h.base.Query()
	ep, err := url.Parse(q.Get("endpoint"))
	if err != nil || ep.Host == "" {
		t.Fatalf("%s has no usable endpoint parameter", testenv.EnvS3)
	}
	p := testenv.NewProxy(t, ep.Host)
	ep.Host = p.Addr()
	q.Set("endpoint", ep.String())
	u := *h.base
	u.RawQuery = q.Encode()
	h.mu.Lock()
	h.prox[u.String()] = p
	h.mu.Unlock()
	return u.String()
}

// newQueue fills root/qN/pending/ with n objects k00001 ... and returns
// the queue's prefix root and the names in source order.
func (h *harness) newQueue(t testing.TB, n int, body func(i int) []byte) (string, []string) {
	t.Helper()
	qroot := fmt.Sprintf("%sq%d/", h.root, h.seq.Add(1))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("k%05d", i+1)
	}
	ctx := context.Background()
	err := forEach(n, 32, func(i int) error {
		b := []byte(fmt.Sprintf(`{"n": %d}`, i+1))
		if body != nil {
			b = body(i)
		}
		return h.admin.WriteAll(ctx, qroot+"pending/"+names[i], b, nil)
	})
	if err != nil {
		t.Fatalf("fill queue: %v", err)
	}
	return qroot, names
}

func (h *harness) NewQueue(t *testing.T, n int, opts cursortest.QueueOptions) (cursor.Spec, []string) {
	t.Helper()
	qroot, names := h.newQueue(t, n, nil)
	lease := opts.Lease
	if lease == 0 {
		lease = time.Minute
	}
	return cursor.Spec{
		Kind:        "s3prefix",
		Auth:        "s3_test",
		Credential:  h.credential(t),
		Options:     map[string]any{"prefix": qroot + "pending/"},
		Lease:       lease,
		MaxAttempts: opts.MaxAttempts,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, names
}

// Complete does nothing: Ack moves the objects.
func (h *harness) Complete(context.Context, cursor.Spec, []cursor.Row) error { return nil }

func rootOf(spec cursor.Spec) string {
	return strings.TrimSuffix(spec.Options["prefix"].(string), "pending/")
}

func (h *harness) list(t testing.TB, prefix string) []string {
	t.Helper()
	it := h.admin.List(&blob.ListOptions{Prefix: prefix})
	var names []string
	for {
		obj, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatalf("list %s: %v", prefix, err)
		}
		names = append(names, strings.TrimPrefix(obj.Key, prefix))
	}
}

func (h *harness) DeadLettered(t *testing.T, spec cursor.Spec) []string {
	t.Helper()
	return h.list(t, rootOf(spec)+"dead/")
}

// DropConnections closes every connection between the driver and the
// server that the queue's proxy carries.
func (h *harness) DropConnections(t *testing.T, spec cursor.Spec) {
	t.Helper()
	h.mu.Lock()
	p := h.prox[spec.Credential]
	h.mu.Unlock()
	if p == nil {
		t.Skip("memblob is in-process: there is no connection to drop")
	}
	if n := p.DropConnections(); n == 0 {
		// versitygw closes most connections after the response, so there
		// may be none open between claims; the next claim still goes
		// through a proxy that has just cut everything.
		t.Log("no connection was open at the drop")
	}
	p.WaitClosed(t, 10*time.Second)
}

// ClaimAndDie claims and then has the server drop the claimer's
// connections, as a process death would; memblob has none, and its
// claims are lease markers like any other, so its claimer just vanishes.
func (h *harness) ClaimAndDie(t *testing.T, spec cursor.Spec, max int) []string {
	h.mu.Lock()
	p := h.prox[spec.Credential]
	h.mu.Unlock()
	if p == nil {
		return cursortest.ClaimAndAbandon(t, h, spec, max)
	}
	return cursortest.ClaimAndDropConnections(t, h, spec, max)
}
