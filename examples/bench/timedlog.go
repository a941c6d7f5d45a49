package main

import (
	"context"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// timedLog is the engine's event log as the bench hands it over: with
// timed set it records every Append's latency (the time a frame's claim
// waits for before it commits), and with delay set it holds every Append
// that long after it returned (a diagnostic: what a slower log costs a
// drain, with no extra CPU). -heap leaves timed unset: the latencies grow
// with the rows drained, and would count in the peak heap it measures.
type timedLog struct {
	eventlog.Log
	timed bool
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
	if !t.timed {
		return res, err
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
