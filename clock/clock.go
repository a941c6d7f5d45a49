// Package clock is the source of time the engine's leases, retries,
// heartbeats and backoffs read: the system clock in production, and a
// Fake that a test advances by hand, so a one-minute lease expires in a
// test without a minute of waiting and without timing slack.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers and tickers on it.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that fires every d (d > 0). Like
	// time.Ticker, it drops ticks a slow receiver misses.
	NewTicker(d time.Duration) Ticker
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	// C delivers the time the timer fired.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// Ticker is a periodic ticker of a Clock.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// System returns the clock of the time package.
func System() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time                   { return time.Now() }
func (systemClock) NewTimer(d time.Duration) Timer   { return sysTimer{time.NewTimer(d)} }
func (systemClock) NewTicker(d time.Duration) Ticker { return sysTicker{time.NewTicker(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }

type sysTicker struct{ t *time.Ticker }

func (t sysTicker) C() <-chan time.Time { return t.t.C }
func (t sysTicker) Stop()               { t.t.Stop() }

// Fake is a Clock whose time moves only when Advance or Set moves it;
// timers and tickers fire then, in deadline order. It is safe for
// concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	// added is closed (and replaced) whenever a waiter is added.
	added chan struct{}
}

type fakeWaiter struct {
	at     time.Time
	period time.Duration // > 0 for a ticker
	ch     chan time.Time
	f      *Fake
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, added: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer implements Clock.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return fakeTimer{f.add(d, 0)}
}

// NewTicker implements Clock.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	return fakeTicker{f.add(d, d)}
}

func (f *Fake) add(d, period time.Duration) *fakeWaiter {
	f.mu.Lock()
	w := &fakeWaiter{at: f.now.Add(d), period: period, ch: make(chan time.Time, 1), f: f}
	if d <= 0 && period == 0 {
		w.ch <- f.now
		f.mu.Unlock()
		return w
	}
	f.waiters = append(f.waiters, w)
	close(f.added)
	f.added = make(chan struct{})
	f.mu.Unlock()
	return w
}

// Advance moves the time d forward and fires what fell due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.setLocked(f.now.Add(d))
	f.mu.Unlock()
}

// Set moves the time to t (never backwards) and fires what fell due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	if t.After(f.now) {
		f.setLocked(t)
	}
	f.mu.Unlock()
}

func (f *Fake) setLocked(t time.Time) {
	f.now = t
	sort.SliceStable(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.at.After(t) {
			kept = append(kept, w)
			continue
		}
		select {
		case w.ch <- w.at:
		default: // a tick the receiver has not taken yet: dropped, as time.Ticker does
		}
		if w.period > 0 {
			for !w.at.After(t) {
				w.at = w.at.Add(w.period)
			}
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// Waiters returns how many timers and tickers wait on the clock.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// WaitForWaiters blocks until at least n timers and tickers wait on the
// clock, so a test can advance time knowing a goroutine has armed its
// timer. It returns false if done is closed first.
func (f *Fake) WaitForWaiters(n int, done <-chan struct{}) bool {
	for {
		f.mu.Lock()
		n0, added := len(f.waiters), f.added
		f.mu.Unlock()
		if n0 >= n {
			return true
		}
		select {
		case <-added:
		case <-done:
			return false
		}
	}
}

type fakeTimer struct{ *fakeWaiter }

func (t fakeTimer) C() <-chan time.Time { return t.ch }
func (t fakeTimer) Stop() bool          { return t.remove() }

type fakeTicker struct{ *fakeWaiter }

func (t fakeTicker) C() <-chan time.Time { return t.ch }
func (t fakeTicker) Stop()               { t.remove() }

func (w *fakeWaiter) remove() bool {
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.waiters {
		if x == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			return true
		}
	}
	return false
}
