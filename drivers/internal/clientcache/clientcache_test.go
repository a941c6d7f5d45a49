package clientcache

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
)

type client struct{ name string }

func TestCache(t *testing.T) {
	t.Parallel()
	var closed []string
	errB := errors.New("b failed")
	c := New(func(v *client) error {
		closed = append(closed, v.name)
		if v.name == "b" {
			return errB
		}
		return nil
	})

	opens := 0
	get := func(cred string) (*client, error) {
		return c.Get(cred, func() (*client, error) {
			opens++
			if cred == "" {
				return nil, errors.New("empty credential")
			}
			return &client{name: cred}, nil
		})
	}
	b1, err := get("b")
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := get("b")
	if b1 != b2 || opens != 1 {
		t.Fatalf("second Get made a new client (opens=%d)", opens)
	}
	if _, err := get(""); err == nil {
		t.Fatal("want the open error")
	}
	if _, err := get(""); err == nil || opens != 3 {
		t.Fatalf("a failed open was cached (opens=%d)", opens)
	}
	c.Forget("b", &client{name: "b"}) // another client: kept
	if b3, _ := get("b"); b3 != b1 {
		t.Fatal("Forget dropped a client it was not given")
	}
	c.Forget("b", b1)
	if b4, _ := get("b"); b4 == b1 {
		t.Fatal("Forget kept the client")
	}
	if _, err := get("a"); err != nil {
		t.Fatal(err)
	}

	if c.Closed() {
		t.Fatal("Closed before Close")
	}
	if err := c.Close(); !errors.Is(err, errB) {
		t.Fatalf("Close = %v, want %v", err, errB)
	}
	if !slices.Equal(closed, []string{"a", "b"}) {
		t.Fatalf("closed %v, want [a b]", closed)
	}
	if !c.Closed() {
		t.Fatal("not Closed after Close")
	}
	if _, err := get("a"); !errors.Is(err, cursor.ErrClosed) {
		t.Fatalf("Get after Close = %v, want cursor.ErrClosed", err)
	}
	if err := c.Close(); err != nil || len(closed) != 2 {
		t.Fatalf("second Close = %v, closed %v", err, closed)
	}
}

func TestCacheConcurrentGet(t *testing.T) {
	t.Parallel()
	c := New(func(*client) error { return nil })
	var mu sync.Mutex
	opens := 0
	var wg sync.WaitGroup
	got := make([]*client, 16)
	for i := range got {
		wg.Go(func() {
			got[i], _ = c.Get("x", func() (*client, error) {
				mu.Lock()
				opens++
				mu.Unlock()
				return &client{name: "x"}, nil
			})
		})
	}
	wg.Wait()
	if opens != 1 {
		t.Fatalf("opened %d clients for one credential", opens)
	}
	for _, v := range got {
		if v != got[0] {
			t.Fatal("Get returned different clients for one credential")
		}
	}
}

// Clients taken with Acquire (a URL a playbook gives) are closed once
// more than MaxIdle of them sit unheld, the least recently released
// first; one still held, or pinned by Get, is never closed.
func TestAcquireClosesIdleClientsPastMaxIdle(t *testing.T) {
	t.Parallel()
	var closed []string
	c := New(func(v *client) error {
		closed = append(closed, v.name)
		return nil
	})
	opens := 0
	acquire := func(key string) (*client, func()) {
		t.Helper()
		v, release, err := c.Acquire(key, func() (*client, error) {
			opens++
			return &client{name: key}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return v, release
	}
	if _, err := c.Get("pinned", func() (*client, error) { return &client{name: "pinned"}, nil }); err != nil {
		t.Fatal(err)
	}
	_, holdHeld := acquire("held")
	// Used once and released, in order: u0 is the least recently used.
	for i := range MaxIdle {
		_, release := acquire(fmt.Sprintf("u%d", i))
		release()
		release() // a second release is a no-op
	}
	if len(closed) != 0 {
		t.Fatalf("closed %v with %d idle clients, MaxIdle %d", closed, MaxIdle, MaxIdle)
	}
	// u0 again: cached, and now the most recent.
	before := opens
	_, release := acquire("u0")
	release()
	if opens != before {
		t.Fatal("a cached idle client was opened again")
	}
	_, release = acquire("one-more")
	release()
	if !slices.Equal(closed, []string{"u1"}) {
		t.Fatalf("closed %v past MaxIdle, want the least recently released, u1", closed)
	}
	// The held and the pinned clients survive any number of others.
	for i := range 3 * MaxIdle {
		_, release := acquire(fmt.Sprintf("x%d", i))
		release()
	}
	if slices.Contains(closed, "held") || slices.Contains(closed, "pinned") {
		t.Fatalf("closed %v: a held or pinned client went", closed)
	}
	holdHeld()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Every client made is closed once: pinned, held, u0-u15, one-more,
	// the x ones.
	all := 2 + MaxIdle + 1 + 3*MaxIdle
	if len(closed) != all || len(slices.Compact(slices.Sorted(slices.Values(closed)))) != all {
		t.Fatalf("after Close, closed %d clients %v; want each of the %d once", len(closed), closed, all)
	}
}
