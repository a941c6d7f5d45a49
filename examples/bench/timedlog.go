package main

import (
	"context"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// timedLog is the engine's event log as the bench hands it over: it times
// every Append (the latency a frame's claim waits for before it commits)
// and, with delay set, holds every Append that long after it returned (a
// diagnostic: what a slower log costs a drain, with no extra CPU).
type timedLog struct {
	eventlog.Log
	delay time.Duration

	mu   sync.Mutex
	lats []time.Duration
}

func (t *timedLog) Append(ctx context.Context, events []eventlog.Event) ([]eventlog.Result, error) {
	start := time.Now()
	res, err := t.Log.Append(ctx, events)
	if t.delay > 0 {
		select {
		case <-time.After(t.delay):
		case <-ctx.Done():
		}
	}
	lat := time.Since(start)
	t.mu.Lock()
	t.lats = append(t.lats, lat)
	t.mu.Unlock()
	return res, err
}

// latencies returns the appends' latencies in microseconds.
func (t *timedLog) latencies() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int64, len(t.lats))
	for i, d := range t.lats {
		out[i] = d.Microseconds()
	}
	return out
}
