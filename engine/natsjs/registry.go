package natsjs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/engine"
)

// DefaultCapacityEvery is how often a worker reports its capacity.
const DefaultCapacityEvery = 2 * time.Second

// capacityMissed is how many capacity reports a worker may miss before a
// registry forgets it.
const capacityMissed = 3

// capacityMsg is a worker's capacity report on <prefix>.workers.
type capacityMsg struct {
	engine.WorkerInfo
	// EveryMs is the worker's report interval, so a registry knows when
	// it has missed too many.
	EveryMs int64 `json:"every_ms"`
	// Direct says the worker takes commands sent to it alone
	// (<prefix>.cmd.<pool>.<id>).
	Direct bool `json:"direct,omitempty"`
	// Gone is the last report of a worker that stops.
	Gone bool `json:"gone,omitempty"`
}

type registered struct {
	msg     capacityMsg
	expires time.Time
	// claimed counts the commands sent to it since its last report, so
	// a burst of dispatches spreads over the workers instead of all
	// going to the one that last reported the most free slots.
	claimed int
}

// Registry keeps the workers of one prefix as their capacity reports
// describe them: what pool, labels and free slots each has. It is an
// engine.WorkerLister (GET /v1/workers), and the Dispatcher uses one to
// send commands of labelled steps to a matching worker. Every process may
// run one; a worker missing capacityMissed (3) reports is forgotten.
type Registry struct {
	cfg Config
	n   names
	sub *nats.Subscription
	// now is the registry's clock.
	now func() time.Time
	// onGone, if set, is called (outside the lock) with a worker the
	// registry forgot.
	onGone func(engine.WorkerInfo)

	mu      sync.Mutex
	workers map[string]*registered
}

var _ engine.WorkerLister = (*Registry)(nil)

// NewRegistry subscribes to the workers' capacity reports. Close stops
// it.
func NewRegistry(cfg Config) (*Registry, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Registry{cfg: cfg, n: namesOf(cfg.Prefix), now: time.Now, workers: map[string]*registered{}}
	r.sub, err = cfg.Conn.Subscribe(r.n.workers, r.onReport)
	if err != nil {
		return nil, fmt.Errorf("natsjs: subscribe %s: %w", r.n.workers, err)
	}
	// Ask the workers for a report now rather than wait for their next.
	_ = cfg.Conn.Publish(r.n.workersPing, nil)
	return r, nil
}

// Close stops listening to reports.
func (r *Registry) Close() error {
	// Unsubscribing fails only on a closed connection, which has dropped
	// the subscription already.
	_ = r.sub.Unsubscribe()
	return nil
}

func (r *Registry) onReport(m *nats.Msg) {
	var c capacityMsg
	if json.Unmarshal(m.Data, &c) != nil || c.ID == "" {
		return
	}
	now := r.now()
	r.mu.Lock()
	if c.Gone {
		w := r.workers[c.ID]
		delete(r.workers, c.ID)
		r.mu.Unlock()
		if w != nil && r.onGone != nil {
			r.onGone(w.msg.WorkerInfo)
		}
		return
	}
	every := time.Duration(c.EveryMs) * time.Millisecond
	if every <= 0 {
		every = DefaultCapacityEvery
	}
	c.SeenAt = now
	r.workers[c.ID] = &registered{msg: c, expires: now.Add(capacityMissed * every)}
	r.mu.Unlock()
}

// expire forgets the workers whose reports stopped; call with r.mu held.
// It returns them.
func (r *Registry) expire(now time.Time) []engine.WorkerInfo {
	var gone []engine.WorkerInfo
	for id, w := range r.workers {
		if now.After(w.expires) {
			gone = append(gone, w.msg.WorkerInfo)
			delete(r.workers, id)
		}
	}
	return gone
}

func (r *Registry) forget(gone []engine.WorkerInfo) {
	if r.onGone == nil {
		return
	}
	for _, w := range gone {
		r.onGone(w)
	}
}

// Workers implements engine.WorkerLister: the live workers, by pool and
// id.
func (r *Registry) Workers(ctx context.Context) ([]engine.WorkerInfo, error) {
	r.mu.Lock()
	gone := r.expire(r.now())
	out := make([]engine.WorkerInfo, 0, len(r.workers))
	for _, w := range r.workers {
		info := w.msg.WorkerInfo
		info.Labels = maps.Clone(info.Labels)
		out = append(out, info)
	}
	r.mu.Unlock()
	r.forget(gone)
	slices.SortFunc(out, func(a, b engine.WorkerInfo) int {
		if c := strings.Compare(a.Pool, b.Pool); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// pick returns the live worker of pool that takes commands sent to it
// alone and whose labels include every one of labels, the one with the
// most free slots (less those already sent to it since its report); false
// when there is none.
func (r *Registry) pick(pool string, labels map[string]string) (string, bool) {
	r.mu.Lock()
	gone := r.expire(r.now())
	var best *registered
	for _, w := range r.workers {
		if w.msg.Pool != pool || !w.msg.Direct || !hasLabels(w.msg.Labels, labels) {
			continue
		}
		if best == nil || free(w) > free(best) || (free(w) == free(best) && w.msg.ID < best.msg.ID) {
			best = w
		}
	}
	id := ""
	if best != nil {
		best.claimed++
		id = best.msg.ID
	}
	r.mu.Unlock()
	r.forget(gone)
	return id, id != ""
}

func free(w *registered) int { return w.msg.Free - w.claimed }

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
