// Package faultlog wraps an eventlog.Log and injects the faults a
// production log throws at the engine: appends that fail before or after
// they reach the store (the reply lost), reads that fail, and appends that
// are slow or held until a test lets them go. The engine's tests run their
// executions through it; a host can do the same with its own code.
//
//	fl := faultlog.New(eventlog.NewMemory())
//	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, Match: faultlog.HasType(eventlog.TypeCommandCompleted)})
//	eng, _ := engine.New(engine.Config{Log: fl, ...})
package faultlog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// ErrInjected is the error an injected fault returns unless Fault.Err
// says otherwise.
var ErrInjected = errors.New("faultlog: injected fault")

// Op names the operations a fault applies to.
type Op int

// Operations.
const (
	OpAppend Op = iota + 1
	OpRead
	OpExecutions
)

// String returns the operation's name: append, read or executions.
func (o Op) String() string {
	switch o {
	case OpAppend:
		return "append"
	case OpRead:
		return "read"
	case OpExecutions:
		return "executions"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Call describes an operation a fault may match.
type Call struct {
	Op Op
	// Events is an append's batch.
	Events []eventlog.Event
	// ExecutionID is a read's execution.
	ExecutionID string
}

// AppendsInOrder returns a Fault.Match for the appends whose batch holds
// events of the given types in that order (others may come between): a
// chained frame's append, say, with eventlog.TypeFrameDone then
// eventlog.TypeFrameClaimed.
func AppendsInOrder(types ...string) func(Call) bool {
	return func(c Call) bool {
		next := 0
		for _, ev := range c.Events {
			if next < len(types) && ev.Type == types[next] {
				next++
			}
		}
		return len(types) > 0 && next == len(types)
	}
}

// Fault is one injected behaviour. A call meets the first fault (in the
// order injected) that has Op, matches and has Times left.
type Fault struct {
	Op Op
	// Match selects the calls the fault applies to; nil matches every
	// call of Op.
	Match func(Call) bool
	// Times is how many matching calls the fault affects; 0 means all.
	Times int
	// Rate, in (0, 1), makes the fault affect a matching call only with
	// that probability (see New's seed); 0 means always.
	Rate float64
	// Err is returned; nil means ErrInjected, unless Delay or Gate is set
	// and Fail is false: then the call only waits and proceeds.
	Err error
	// Fail forces the error when Delay or Gate is set.
	Fail bool
	// AfterCommit, for appends, passes the batch to the wrapped log first
	// and returns the error after: the events are stored but the caller
	// hears of a failure, as when a connection drops before the reply.
	AfterCommit bool
	// Delay makes the call wait that long first (or until its context ends).
	Delay time.Duration
	// Gate makes the call wait until the channel is closed (or its context
	// ends).
	Gate <-chan struct{}
}

func (f *Fault) slowOnly() bool { return (f.Delay > 0 || f.Gate != nil) && !f.Fail && f.Err == nil }

// Log is an eventlog.Log that injects Faults into a wrapped Log. Wait
// and Close pass straight through.
type Log struct {
	eventlog.Log

	mu     sync.Mutex
	faults []*Fault
	rng    *rand.Rand
	hits   map[Op]int
	calls  map[Op]int
}

var _ eventlog.Log = (*Log)(nil)

// New wraps log; rates draw from a generator seeded with seed (a test
// logs it, to replay a failure).
func New(log eventlog.Log, seed ...uint64) *Log {
	var s uint64
	if len(seed) > 0 {
		s = seed[0]
	}
	return &Log{Log: log, rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)), hits: map[Op]int{}, calls: map[Op]int{}}
}

// Inject adds a fault.
func (l *Log) Inject(f Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = append(l.faults, &f)
}

// Clear removes every fault.
func (l *Log) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = nil
}

// Hits returns how many calls of op a fault affected.
func (l *Log) Hits(op Op) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hits[op]
}

// Calls returns how many calls of op were made.
func (l *Log) Calls(op Op) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[op]
}

// take returns the fault the call meets, if any, counting it down.
func (l *Log) take(c Call) *Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[c.Op]++
	for i, f := range l.faults {
		if f.Op != c.Op || (f.Match != nil && !f.Match(c)) {
			continue
		}
		if f.Rate > 0 && f.Rate < 1 && l.rng.Float64() >= f.Rate {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				l.faults = slices.Delete(l.faults, i, i+1)
			}
		}
		l.hits[c.Op]++
		return f
	}
	return nil
}

// hold waits out the fault's Delay and Gate.
func hold(ctx context.Context, f *Fault) error {
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if f.Gate != nil {
		select {
		case <-f.Gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *Fault) err(op Op) error {
	if f.Err != nil {
		return f.Err
	}
	return fmt.Errorf("%w (%s)", ErrInjected, op)
}

// Append implements eventlog.Log.
func (l *Log) Append(ctx context.Context, events []eventlog.Event) ([]eventlog.Result, error) {
	f := l.take(Call{Op: OpAppend, Events: events})
	if f == nil {
		return l.Log.Append(ctx, events)
	}
	if err := hold(ctx, f); err != nil {
		return nil, err
	}
	if f.slowOnly() {
		return l.Log.Append(ctx, events)
	}
	if f.AfterCommit {
		if _, err := l.Log.Append(ctx, events); err != nil {
			return nil, err
		}
	}
	return nil, f.err(OpAppend)
}

// Read implements eventlog.Log.
func (l *Log) Read(ctx context.Context, executionID string, afterSeq int64, limit int) ([]eventlog.Event, error) {
	f := l.take(Call{Op: OpRead, ExecutionID: executionID})
	if f == nil {
		return l.Log.Read(ctx, executionID, afterSeq, limit)
	}
	if err := hold(ctx, f); err != nil {
		return nil, err
	}
	if f.slowOnly() {
		return l.Log.Read(ctx, executionID, afterSeq, limit)
	}
	return nil, f.err(OpRead)
}

// Executions implements eventlog.Log.
func (l *Log) Executions(ctx context.Context, q eventlog.ExecutionsQuery) ([]string, error) {
	f := l.take(Call{Op: OpExecutions})
	if f == nil {
		return l.Log.Executions(ctx, q)
	}
	if err := hold(ctx, f); err != nil {
		return nil, err
	}
	if f.slowOnly() {
		return l.Log.Executions(ctx, q)
	}
	return nil, f.err(OpExecutions)
}

// HasType matches an append whose batch holds an event of one of types.
func HasType(types ...string) func(Call) bool {
	return func(c Call) bool {
		for _, ev := range c.Events {
			if slices.Contains(types, ev.Type) {
				return true
			}
		}
		return false
	}
}

// Execution matches a call on the execution id (a read's, or any event of
// an append's batch).
func Execution(id string) func(Call) bool {
	return func(c Call) bool {
		if c.ExecutionID == id {
			return true
		}
		for _, ev := range c.Events {
			if ev.ExecutionID == id {
				return true
			}
		}
		return false
	}
}
