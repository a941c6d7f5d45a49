package api

import (
	"sync"
	"testing"
	"time"
)

// fakeNow is a clock the test moves.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }

func (f *fakeNow) add(d time.Duration) { f.mu.Lock(); f.t = f.t.Add(d); f.mu.Unlock() }

// A client that spent its allowance earns one failure back every
// authRefill, up to the burst, and is told how long to wait; other
// addresses keep theirs; the remembered addresses stay bounded.
func TestAuthLimiterRefills(t *testing.T) {
	clk := &fakeNow{t: time.Unix(1_000_000, 0)}
	l := newAuthLimiter(2, clk.now)
	for range 2 {
		l.failed("10.0.0.1")
	}
	wait, blocked := l.blocked("10.0.0.1")
	if !blocked || wait != authRefill {
		t.Fatalf("after the allowance: blocked %v, wait %v; want blocked for %v", blocked, wait, authRefill)
	}
	if _, blocked := l.blocked("10.0.0.2"); blocked {
		t.Fatal("another address is blocked")
	}
	clk.add(authRefill / 2)
	if wait, blocked := l.blocked("10.0.0.1"); !blocked || wait != authRefill/2 {
		t.Fatalf("half a refill later: blocked %v, wait %v; want blocked for %v", blocked, wait, authRefill/2)
	}
	clk.add(authRefill / 2)
	if _, blocked := l.blocked("10.0.0.1"); blocked {
		t.Fatal("a refill later: still blocked")
	}
	l.failed("10.0.0.1")
	if _, blocked := l.blocked("10.0.0.1"); !blocked {
		t.Fatal("the failure earned back was not spent")
	}
	clk.add(time.Hour)
	for range 2 {
		if _, blocked := l.blocked("10.0.0.1"); blocked {
			t.Fatal("an hour later: blocked")
		}
		l.failed("10.0.0.1")
	}

	for i := range authMaxClients + 10 {
		l.failed(time.Duration(i).String())
	}
	if n := len(l.clients); n > authMaxClients {
		t.Fatalf("%d addresses remembered, want at most %d", n, authMaxClients)
	}
	if newAuthLimiter(-1, clk.now) != nil {
		t.Fatal("a negative allowance must turn the limit off")
	}
}
