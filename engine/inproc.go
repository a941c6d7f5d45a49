package engine

import (
	"context"
	"sync"
)

// localQueue is the in-process transport: an unbounded FIFO of commands
// that this engine's worker goroutines drain. Unbounded so the
// orchestrator never blocks on dispatch while workers wait on it to record
// their reports.
type localQueue struct {
	mu    sync.Mutex
	cond  chan struct{}
	items []*Command
	// cancel tells this engine's workers of a cancel (Worker.Cancel).
	cancel func(executionID string)
}

func newLocalQueue() *localQueue { return &localQueue{cond: make(chan struct{}, 1)} }

// Dispatch implements Dispatcher.
func (q *localQueue) Dispatch(cmd *Command) {
	q.mu.Lock()
	q.items = append(q.items, cmd)
	q.mu.Unlock()
	select {
	case q.cond <- struct{}{}:
	default:
	}
}

// Durable implements Dispatcher: commands queued in memory die with the
// process.
func (q *localQueue) Durable() bool { return false }

// Cancel implements Dispatcher: the workers are in this process.
func (q *localQueue) Cancel(executionID string) { q.cancel(executionID) }

func (q *localQueue) next(ctx context.Context) (*Command, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			cmd := q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			more := len(q.items) > 0
			q.mu.Unlock()
			if more {
				select {
				case q.cond <- struct{}{}:
				default:
				}
			}
			return cmd, true
		}
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-q.cond:
		}
	}
}
