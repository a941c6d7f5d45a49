package leakcheck

import (
	"strings"
	"testing"
	"time"
)

// A goroutine that ends after goleak's own 0.4 s of looking again is not
// reported; one that is still running when find gives up is, by the
// function it runs.
func TestFindWaitsForEndingGoroutines(t *testing.T) {
	start := time.Now()
	go endsAfter(time.Second)
	if err := find(Settle); err != nil {
		t.Fatalf("a goroutine ending after 1s was reported: %v", err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("find saw no goroutine after %v, before the one it had to wait for ended", waited)
	}

	stop := make(chan struct{})
	defer close(stop)
	go blockedUntil(stop)
	start = time.Now()
	err := find(time.Second)
	if err == nil || !strings.Contains(err.Error(), "blockedUntil") {
		t.Fatalf("a goroutine still running was not reported: %v", err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("find gave up after %v, before its time", waited)
	}
}

func endsAfter(d time.Duration) { time.Sleep(d) }

func blockedUntil(stop chan struct{}) { <-stop }
