package engine

import (
	"sync"
	"time"
)

// cancelMemory is how long a worker remembers an execution it was told is
// cancelled, so that commands of it that arrive late stop at once.
const cancelMemory = time.Hour

// cancels tracks, for one worker, the executions being cancelled and the
// commands running for them. Its zero value is ready to use.
type cancels struct {
	mu sync.Mutex
	m  map[string]*cancelEntry
}

type cancelEntry struct {
	ch        chan struct{} // closed once the execution is cancelled
	cancelled time.Time
	watchers  int
}

// watch returns a channel that is closed when executionID is cancelled
// (already closed if it was), and a release to call when the command no
// longer runs.
func (c *cancels) watch(executionID string) (<-chan struct{}, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(executionID)
	e.watchers++
	return e.ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		e.watchers--
		if e.watchers == 0 && e.cancelled.IsZero() {
			delete(c.m, executionID)
		}
	}
}

// cancel marks executionID cancelled, signalling its running commands,
// and forgets executions cancelled longer than cancelMemory ago.
func (c *cancels) cancel(executionID string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(executionID)
	if e.cancelled.IsZero() {
		e.cancelled = now
		close(e.ch)
	}
	for id, x := range c.m {
		if x.watchers == 0 && !x.cancelled.IsZero() && now.Sub(x.cancelled) > cancelMemory {
			delete(c.m, id)
		}
	}
}

func (c *cancels) entry(executionID string) *cancelEntry {
	if c.m == nil {
		c.m = map[string]*cancelEntry{}
	}
	e := c.m[executionID]
	if e == nil {
		e = &cancelEntry{ch: make(chan struct{})}
		c.m[executionID] = e
	}
	return e
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
