package engine

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// Defaults of PartialLimits.
const (
	// DefaultPartialMaxBytes bounds one partial result's encoded data.
	DefaultPartialMaxBytes = 16 << 10
	// DefaultPartialPerSecond is the sustained rate of one command's
	// partial results.
	DefaultPartialPerSecond = 10
	// DefaultPartialBurst is how many partial results a command may hand
	// on at once before the rate applies.
	DefaultPartialBurst = 20
	// DefaultPartialMaxEvents bounds the partial results of one command.
	DefaultPartialMaxEvents = 1000
)

// partialQueue bounds the partial results waiting to be reported; more
// are dropped (and counted) rather than block the tool.
const partialQueue = 64

// PartialLimits bound the call.partial events a command writes: the
// tools' partial results (tools.Call.EmitPartial) are for watching a
// command progress, so they are dropped rather than let grow the log or
// slow the tool. Dropped partials are counted in the next one recorded
// (its "dropped" field), or in a last one without data when the command
// ends.
type PartialLimits struct {
	// MaxBytes bounds one partial's encoded data; larger data is recorded
	// as {"_truncated": true, "_size": N}. Defaults to
	// DefaultPartialMaxBytes (16 KiB).
	MaxBytes int
	// PerSecond and Burst bound the rate of a command's partials (a token
	// bucket). Default to DefaultPartialPerSecond (10) and
	// DefaultPartialBurst (20).
	PerSecond float64
	Burst     int
	// MaxEvents bounds the partials of one command. Defaults to
	// DefaultPartialMaxEvents (1000); negative records none.
	MaxEvents int
}

func (l PartialLimits) withDefaults() PartialLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultPartialMaxBytes
	}
	if l.PerSecond <= 0 {
		l.PerSecond = DefaultPartialPerSecond
	}
	if l.Burst <= 0 {
		l.Burst = DefaultPartialBurst
	}
	if l.MaxEvents == 0 {
		l.MaxEvents = DefaultPartialMaxEvents
	}
	return l
}

// partialPayload is call.partial's payload.
type partialPayload struct {
	// Task is the pipeline task that produced it; Row the frame row.
	Task string `json:"task,omitempty"`
	Row  string `json:"row,omitempty"`
	// Seq numbers the command's partials from 1.
	Seq  int             `json:"seq"`
	Data json.RawMessage `json:"data,omitempty"`
	// Dropped counts the partials dropped since the previous one.
	Dropped int `json:"dropped,omitempty"`
}

// truncated stands for data over the size bound, as NoETL writes it.
type truncated struct {
	Truncated bool `json:"_truncated"`
	Size      int  `json:"_size"`
}

// partials reports one command's partial results in the background, in
// order, within its PartialLimits. Its goroutine starts with the first
// partial to report: most commands report none, and a frame or a step
// pays no goroutine for it.
type partials struct {
	w   *Worker
	cmd *Command
	rep Reporter
	ctx context.Context
	lim PartialLimits

	mu      sync.Mutex
	queue   []partialPayload
	tokens  float64
	last    time.Time
	seq     int
	dropped int
	closed  bool
	started bool // run is running, or has returned
	wake    chan struct{}
	done    chan struct{}
}

func (w *Worker) startPartials(ctx context.Context, cmd *Command, rep Reporter) *partials {
	lim := w.Partials.withDefaults()
	p := &partials{w: w, cmd: cmd, rep: rep, ctx: ctx, lim: lim, tokens: float64(lim.Burst), last: time.Now(),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	return p
}

// startLocked starts run if it has not started; p.mu is held.
func (p *partials) startLocked() {
	if !p.started {
		p.started = true
		go p.run()
	}
}

// emit queues one partial result; it never blocks.
func (p *partials) emit(task, row string, data any) {
	b := mustJSON(data)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	now := time.Now()
	p.tokens = min(float64(p.lim.Burst), p.tokens+now.Sub(p.last).Seconds()*p.lim.PerSecond)
	p.last = now
	if p.lim.MaxEvents < 0 || p.seq >= p.lim.MaxEvents || p.tokens < 1 || len(p.queue) >= partialQueue {
		p.dropped++
		return
	}
	p.tokens--
	p.seq++
	if len(b) > p.lim.MaxBytes {
		b = mustJSON(truncated{Truncated: true, Size: len(b)})
	}
	p.queue = append(p.queue, partialPayload{Task: task, Row: row, Seq: p.seq, Data: b, Dropped: p.dropped})
	p.dropped = 0
	p.startLocked()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *partials) run() {
	defer close(p.done)
	for {
		p.mu.Lock()
		batch := p.queue
		p.queue = nil
		closed := p.closed
		p.mu.Unlock()
		for _, pl := range batch {
			if p.ctx.Err() != nil {
				return
			}
			// A refused partial (the command was re-issued, the execution
			// ended) is nothing to act on.
			_ = p.w.report(p.ctx, p.rep, p.cmd, eventlog.TypeCallPartial, pl)
		}
		if closed {
			return
		}
		select {
		case <-p.wake:
		case <-p.ctx.Done():
			return
		}
	}
}

// close reports what is queued (and the count of dropped partials) and
// returns once it is recorded, so the command's final report comes after
// its partials. It is safe to call more than once.
func (p *partials) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		if p.dropped > 0 {
			p.seq++
			p.queue = append(p.queue, partialPayload{Seq: p.seq, Dropped: p.dropped})
			p.dropped = 0
		}
		switch {
		case len(p.queue) > 0:
			p.startLocked()
		case !p.started:
			// Nothing was reported, nothing is to be: no goroutine.
			p.started = true
			close(p.done)
		}
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
	<-p.done
}

// partialSink is what a running task hands its partials to: the
// command's partials, tagged with the frame row the task runs for.
type partialSink struct {
	p   *partials
	row string
}

type partialSinkKey struct{}

func withPartials(ctx context.Context, p *partials, row string) context.Context {
	return &partialCtx{Context: ctx, sink: partialSink{p: p, row: row}}
}

// partialCtx is context.WithValue(ctx, partialSinkKey{}, &sink) in one
// allocation, not two (the value context and the boxed sink): a frame
// makes one for every row.
type partialCtx struct {
	context.Context
	sink partialSink
}

// Value implements context.Context.
func (c *partialCtx) Value(key any) any {
	if _, ok := key.(partialSinkKey); ok {
		return &c.sink
	}
	return c.Context.Value(key)
}

// partialFunc returns the tools.Call.Partial of a task running under ctx,
// or nil when the command records no partials. Secrets revealed to the
// task are concealed in its partials as in its output.
func partialFunc(ctx context.Context, task string, revealed []tools.Revealed) func(any) {
	s, ok := ctx.Value(partialSinkKey{}).(*partialSink)
	if !ok || s.p == nil || s.p.lim.MaxEvents < 0 {
		return nil
	}
	return func(data any) {
		if len(revealed) > 0 {
			data = tools.ConcealSecrets(data, revealed)
		}
		s.p.emit(task, s.row, data)
	}
}
