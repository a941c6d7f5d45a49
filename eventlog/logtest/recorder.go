package logtest

import (
	"context"
	"slices"
	"sync"

	"github.com/cursorflow/cursorflow/eventlog"
)

// Recorder is a Log that keeps a copy of every batch appended through it
// successfully, so a test can see how its writer grouped events into
// appends.
type Recorder struct {
	eventlog.Log
	mu      sync.Mutex
	batches [][]eventlog.Event
}

// NewRecorder returns a Recorder over log.
func NewRecorder(log eventlog.Log) *Recorder { return &Recorder{Log: log} }

// Append implements eventlog.Log.
func (r *Recorder) Append(ctx context.Context, events []eventlog.Event) ([]eventlog.Result, error) {
	res, err := r.Log.Append(ctx, events)
	if err == nil {
		r.mu.Lock()
		r.batches = append(r.batches, slices.Clone(events))
		r.mu.Unlock()
	}
	return res, err
}

// Batches returns the batches stored so far, in order.
func (r *Recorder) Batches() [][]eventlog.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// Counts returns, for each stored batch, how many of its events have typ.
func (r *Recorder) Counts(typ string) []int {
	var out []int
	for _, b := range r.Batches() {
		n := 0
		for _, ev := range b {
			if ev.Type == typ {
				n++
			}
		}
		out = append(out, n)
	}
	return out
}
