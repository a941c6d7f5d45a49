package postgres

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// DefaultNotifyInterval is Config.NotifyInterval's default.
const DefaultNotifyInterval = 10 * time.Millisecond

// closeNotifyTimeout bounds the last round of notifications Close sends: a
// notification is a wake-up, not a record (a waiter that misses it finds
// the events at its next poll), so Close does not wait long on a server
// that stopped answering.
const closeNotifyTimeout = 2 * time.Second

// notifier sends the NOTIFYs of a Log's appends once they have committed,
// in a statement of its own, instead of inside each append.
//
// PostgreSQL serializes the commits of transactions that notify: each
// holds a database-wide lock from its NOTIFY until its commit is on disk,
// so that notifications are queued in commit order. A NOTIFY inside every
// append therefore made concurrent appends, of any execution and from any
// process, commit one at a time, each waiting for the last one's WAL
// flush. Sent apart, they commit together again.
//
// The notifier sends one statement for every execution appended since its
// last: at once when it has been idle, and at most once per interval while
// appends keep coming, so a busy log costs the server a notifying
// transaction per interval, not one per append. A waiter in another
// process wakes at most an interval after the append; one in this process
// is woken directly by the append (sqllog.State.Notify).
type notifier struct {
	send     func(ctx context.Context, ids []string) error
	interval time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	pending map[string]struct{} // execution ids appended since the last round
	closed  bool

	// ctx bounds the rounds before close, which cancels it: a round stuck
	// on a server that stopped answering does not hold Close for the
	// Log's OperationTimeout.
	ctx    context.Context
	cancel context.CancelFunc
	// start starts run on the first add, or marks it never started at
	// close.
	start sync.Once
	kick  chan struct{} // buffered: an add while a round runs or rests
	stop  chan struct{}
	done  chan struct{}

	// warned is when run last logged a failed round; failed counts those
	// since (run's own).
	warned time.Time
	failed int
}

func newNotifier(interval time.Duration, log *slog.Logger, send func(ctx context.Context, ids []string) error) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{
		send: send, interval: interval, log: log, pending: make(map[string]struct{}),
		ctx: ctx, cancel: cancel,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// add queues notifications for ids, appended and committed.
func (n *notifier) add(ids ...string) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	for _, id := range ids {
		n.pending[id] = struct{}{}
	}
	n.mu.Unlock()
	n.start.Do(func() { go n.run() })
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// run sends a round on each kick, then rests an interval; adds meanwhile
// wait for the next round.
func (n *notifier) run() {
	defer close(n.done)
	rest := time.NewTimer(n.interval)
	rest.Stop()
	defer rest.Stop()
	for {
		select {
		case <-n.stop:
			n.last()
			return
		case <-n.kick:
		}
		n.round(n.ctx)
		rest.Reset(n.interval)
		select {
		case <-n.stop:
			n.last()
			return
		case <-rest.C:
		}
	}
}

// last sends, once close has been called, what is pending, bounded by
// closeNotifyTimeout.
func (n *notifier) last() {
	ctx, cancel := context.WithTimeout(context.Background(), closeNotifyTimeout)
	defer cancel()
	n.round(ctx)
}

// round sends the pending notifications under ctx (send applies the Log's
// OperationTimeout too). The ids of a round that failed are pending
// again, for the next round (the last one, if close cut this one short).
func (n *notifier) round(ctx context.Context) {
	n.mu.Lock()
	ids := slices.Sorted(maps.Keys(n.pending))
	clear(n.pending)
	n.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	if err := n.send(ctx, ids); err != nil {
		n.mu.Lock()
		for _, id := range ids {
			n.pending[id] = struct{}{}
		}
		n.mu.Unlock()
		if cutByClose := ctx == n.ctx && n.ctx.Err() != nil; !cutByClose {
			// The appends are stored; waiters elsewhere find them at
			// their next poll (Config.PollInterval). Said once a minute
			// at most: a server that takes appends and refuses NOTIFY (its
			// notification queue full) would otherwise be said every
			// round.
			n.failed++
			if now := time.Now(); now.Sub(n.warned) >= time.Minute {
				n.log.Warn("eventlog: notifying other processes of appends failed; their waiters find the events at their next poll",
					"executions", len(ids), "failed_rounds", n.failed, "err", err)
				n.warned, n.failed = now, 0
			}
		}
	}
}

// close sends what is pending and stops; adds after it are dropped.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	// A round in flight ends; its ids go in the last one.
	n.cancel()
	n.start.Do(func() { close(n.done) }) // never started: nothing to stop
	close(n.stop)
	<-n.done
}
