package clientcache

import (
	"errors"
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
