package notify

import "testing"

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestHub(t *testing.T) {
	var h Hub
	a1, releaseA1 := h.Subscribe("a")
	a2, releaseA2 := h.Subscribe("a")
	b, releaseB := h.Subscribe("b")
	h.Notify("a")
	if !closed(a1) || !closed(a2) || closed(b) {
		t.Fatalf("after Notify(a): a1=%v a2=%v b=%v, want a woken, b not", closed(a1), closed(a2), closed(b))
	}
	// A subscription after a notification waits for the next one.
	a3, releaseA3 := h.Subscribe("a")
	if closed(a3) {
		t.Fatal("a new subscription saw an old notification")
	}
	releaseA1()
	releaseA2()
	h.NotifyAll()
	if !closed(a3) || !closed(b) {
		t.Fatal("NotifyAll missed a subscriber")
	}
	releaseA3()
	releaseB()

	// Released subscriptions leave nothing behind.
	_, release := h.Subscribe("c")
	release()
	if len(h.waiters) != 0 {
		t.Fatalf("%d entries left after every subscriber released", len(h.waiters))
	}
}
