// Package notify broadcasts "something changed for key K" to goroutines
// blocked in a Log's Wait, without polling and without losing a wake-up
// that happens between a waiter's check and its sleep.
package notify

import "sync"

// Hub fans one notification per key out to every current subscriber. The
// zero value is ready to use.
type Hub struct {
	mu      sync.Mutex
	waiters map[string]*entry
}

type entry struct {
	ch   chan struct{}
	refs int
}

// Subscribe returns a channel that is closed by the next Notify(key) or
// NotifyAll after this call, and a release function the caller must call
// once it stops waiting. Subscribe before checking the condition, then
// sleep on the channel: a change that lands in between still wakes the
// caller.
func (h *Hub) Subscribe(key string) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiters == nil {
		h.waiters = make(map[string]*entry)
	}
	e := h.waiters[key]
	if e == nil {
		e = &entry{ch: make(chan struct{})}
		h.waiters[key] = e
	}
	e.refs++
	return e.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		e.refs--
		if e.refs == 0 && h.waiters[key] == e {
			delete(h.waiters, key)
		}
	}
}

// Notify wakes every subscriber of key.
func (h *Hub) Notify(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.waiters[key]; e != nil {
		close(e.ch)
		delete(h.waiters, key)
	}
}

// NotifyAll wakes every subscriber of every key; used when notifications
// may have been missed (a listener reconnected).
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, e := range h.waiters {
		close(e.ch)
		delete(h.waiters, k)
	}
}
