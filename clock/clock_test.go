package clock_test

import (
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/clock"
)

func TestFake(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := clock.NewFake(start)
	timer := c.NewTimer(time.Minute)
	ticker := c.NewTicker(10 * time.Second)
	stopped := c.NewTimer(time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports the first stop only")
	}
	if c.Waiters() != 2 {
		t.Fatalf("%d waiters, want 2", c.Waiters())
	}
	c.Advance(59 * time.Second)
	select {
	case <-timer.C():
		t.Fatal("timer fired early")
	default:
	}
	if at := <-ticker.C(); !at.Equal(start.Add(10 * time.Second)) {
		t.Fatalf("first tick at %v", at)
	}
	c.Advance(time.Second)
	if at := <-timer.C(); !at.Equal(start.Add(time.Minute)) || !c.Now().Equal(start.Add(time.Minute)) {
		t.Fatalf("timer fired at %v, now %v", at, c.Now())
	}
	if at := <-ticker.C(); !at.Equal(start.Add(time.Minute)) {
		t.Fatalf("tick after missed ones at %v", at)
	}
	ticker.Stop()
	if c.Waiters() != 0 {
		t.Fatalf("%d waiters after the timer fired and the ticker stopped", c.Waiters())
	}
	done := make(chan struct{})
	go func() { c.NewTimer(time.Hour); close(done) }()
	if !c.WaitForWaiters(1, nil) {
		t.Fatal("WaitForWaiters gave up")
	}
	<-done
	c.Set(start) // never backwards
	if !c.Now().Equal(start.Add(time.Minute)) {
		t.Fatal("Set moved the clock back")
	}
}
