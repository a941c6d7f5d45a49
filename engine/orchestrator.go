package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// ErrStale is returned to a worker whose report carries a fencing token
// (command id and attempt) that is no longer current: the command was
// re-issued, or already finished. The report is not recorded.
var ErrStale = errors.New("engine: stale report: command was re-issued or finished")

// ErrUnknownExecution is returned for an execution this engine does not
// drive.
var ErrUnknownExecution = errors.New("engine: unknown execution")

// Dispatcher hands commands to workers. It must not block: the
// orchestrator calls it from its loop.
type Dispatcher interface {
	Dispatch(cmd *Command)
	// Durable reports whether a dispatched command outlives this process
	// (a broker keeps it). When false, commands in flight at a restart are
	// re-issued at once on resume instead of after their lease.
	Durable() bool
}

type msgKind int

const (
	msgReport msgKind = iota
	msgHeartbeat
	msgLoad
	msgStart
	msgCancel
	msgList
)

type message struct {
	kind  msgKind
	ev    eventlog.Event
	state *State
	list  *[]string
	reply chan error
}

// execution is an execution driven by this orchestrator.
type execution struct {
	state  *State
	leases map[string]time.Time
	lease  map[string]time.Duration
}

// orchestrator appends, folds, decides and dispatches. One goroutine runs
// its loop; everything it owns is touched only there.
type orchestrator struct {
	log      eventlog.Log
	dispatch Dispatcher
	clock    func() time.Time
	logger   *slog.Logger
	lease    time.Duration
	tick     time.Duration
	maxBatch int
	observer Observer
	// onFinish, if set, is called with an execution's id when it ends.
	onFinish func(executionID string)
	// res writes and reads stored results (a nil store keeps them inline).
	res *results

	inbox chan message
	execs map[string]*execution

	mu       sync.Mutex
	finished map[string]*Summary
	waiters  map[string]chan struct{}
}

func (o *orchestrator) run(ctx context.Context) {
	t := time.NewTicker(o.tick)
	defer t.Stop()
	for {
		var batch []message
		select {
		case <-ctx.Done():
			o.shutdown(ctx.Err())
			return
		case m := <-o.inbox:
			batch = append(batch, m)
		drain:
			for len(batch) < o.maxBatch {
				select {
				case m := <-o.inbox:
					batch = append(batch, m)
				default:
					break drain
				}
			}
		case <-t.C:
		}
		o.step(ctx, batch)
	}
}

func (o *orchestrator) shutdown(err error) {
	for {
		select {
		case m := <-o.inbox:
			if m.reply != nil {
				m.reply <- err
			}
		default:
			return
		}
	}
}

// step handles a batch of messages, decides, appends once, dispatches.
func (o *orchestrator) step(ctx context.Context, batch []message) {
	now := o.clock()
	var pending []eventlog.Event
	var blobs []*pendingBlob
	var replies []chan error
	touched := map[string]bool{}
	var order []string
	touch := func(id string) {
		if !touched[id] {
			touched[id] = true
			order = append(order, id)
		}
	}
	loaded := map[string][]string{} // execution → in-flight commands to expire on load
	for _, m := range batch {
		switch m.kind {
		case msgReport:
			ex := o.execs[m.ev.ExecutionID]
			if ex == nil {
				m.reply <- fmt.Errorf("%w: %s", ErrUnknownExecution, m.ev.ExecutionID)
				continue
			}
			if !ex.state.Accepts(m.ev) {
				m.reply <- ErrStale
				continue
			}
			ev := m.ev
			ev.Time = now
			if err := ex.state.Apply(ev); err != nil {
				m.reply <- err
				continue
			}
			if finalReport(ev.Type) {
				delete(ex.leases, ev.CommandID)
				delete(ex.lease, ev.CommandID)
			}
			pending = append(pending, ev)
			replies = append(replies, m.reply)
			touch(ev.ExecutionID)
		case msgHeartbeat:
			if ex := o.execs[m.ev.ExecutionID]; ex != nil {
				if _, ok := ex.leases[m.ev.CommandID]; ok {
					ex.leases[m.ev.CommandID] = now.Add(ex.lease[m.ev.CommandID])
				}
			}
		case msgStart, msgLoad:
			id := m.state.ExecutionID
			if _, ok := o.execs[id]; ok {
				if m.kind == msgLoad {
					m.reply <- nil // already driven here: nothing to resume
				} else {
					m.reply <- fmt.Errorf("engine: execution %s is already running here", id)
				}
				continue
			}
			m.state.res = o.res
			ex := &execution{state: m.state, leases: map[string]time.Time{}, lease: map[string]time.Duration{}}
			o.execs[id] = ex
			if m.kind == msgStart {
				ev := m.ev
				ev.Time = now
				if err := ex.state.Apply(ev); err != nil {
					delete(o.execs, id)
					m.reply <- err
					continue
				}
				pending = append(pending, ev)
			} else {
				inflight := ex.state.InFlight()
				if o.dispatch.Durable() {
					for _, cid := range inflight {
						d := ex.state.leaseFor(cid, o.lease)
						ex.leases[cid] = now.Add(d)
						ex.lease[cid] = d
					}
				} else {
					loaded[id] = inflight
				}
			}
			replies = append(replies, m.reply)
			touch(id)
		case msgList:
			*m.list = sortedKeys(o.execs)
			m.reply <- nil
		case msgCancel:
			ex := o.execs[m.ev.ExecutionID]
			if ex == nil {
				m.reply <- fmt.Errorf("%w: %s", ErrUnknownExecution, m.ev.ExecutionID)
				continue
			}
			ev := m.ev
			ev.Time = now
			_ = ex.state.Apply(ev)
			pending = append(pending, ev)
			replies = append(replies, m.reply)
			touch(ev.ExecutionID)
		}
	}
	// Decide for every execution that changed, whose lease ran out or
	// whose retry fell due.
	for _, id := range sortedKeys(o.execs) {
		ex := o.execs[id]
		var expired []string
		reason := reasonLease
		if l, ok := loaded[id]; ok {
			expired, reason = l, reasonResume
		}
		for cid, dl := range ex.leases {
			if now.After(dl) {
				expired = append(expired, cid)
				delete(ex.leases, cid)
				delete(ex.lease, cid)
			}
		}
		due := ex.state.NextDue()
		if !touched[id] && len(expired) == 0 && (due.IsZero() || due.After(now)) {
			continue
		}
		if len(expired) > 0 {
			o.logger.Info("re-issuing commands", "execution_id", id, "commands", expired, "reason", reason)
		}
		pending = append(pending, ex.state.Decide(now, expired, reason)...)
		blobs = append(blobs, ex.state.takePending()...)
		touch(id)
	}
	if len(pending) == 0 {
		o.reply(replies, nil)
		return
	}
	// Stored values the decisions refer to are written first: a crash in
	// between leaves an unreferenced object, never a dangling reference.
	if err := o.res.write(ctx, blobs); err != nil {
		o.logger.Error("result store write failed; reloading executions", "error", err)
		o.reply(replies, err)
		for _, id := range order {
			o.reload(ctx, id)
		}
		return
	}
	results, err := o.log.Append(ctx, pending)
	if err != nil {
		o.logger.Error("event log append failed; reloading executions", "error", err, "events", len(pending))
		o.reply(replies, err)
		for _, id := range order {
			o.reload(ctx, id)
		}
		return
	}
	dup := map[string]bool{}
	for i, r := range results {
		if r.Duplicate {
			dup[pending[i].ExecutionID] = true
		}
	}
	for i := range pending {
		ev := &pending[i]
		if results[i].Duplicate {
			continue
		}
		ev.ID, ev.Seq = results[i].ID, results[i].Seq
		if o.observer != nil {
			o.observer.Observe(*ev)
		}
		ex := o.execs[ev.ExecutionID]
		if ex == nil {
			continue
		}
		if ev.Type == eventlog.TypeCommandIssued {
			cmd := o.command(ex, *ev)
			if cmd != nil {
				ex.leases[cmd.ID] = now.Add(cmd.Lease)
				ex.lease[cmd.ID] = cmd.Lease
				o.dispatch.Dispatch(cmd)
			}
		}
	}
	o.reply(replies, nil)
	for _, id := range order {
		ex := o.execs[id]
		if ex == nil {
			continue
		}
		if dup[id] {
			// Another orchestrator decided too: our speculative state may
			// hold what the log refused, so rebuild it from the log.
			o.reload(ctx, id)
			continue
		}
		if ex.state.Status != StatusRunning {
			o.finish(id, ex)
		}
	}
}

func (o *orchestrator) reply(replies []chan error, err error) {
	for _, r := range replies {
		if r != nil {
			r <- err
		}
	}
}

// finalReport reports whether a worker report of type typ ends its
// command (frame.claimed and call.partial come while it runs).
func finalReport(typ string) bool {
	return typ != eventlog.TypeFrameClaimed && typ != eventlog.TypeCallPartial
}

// reload rebuilds an execution's state from the log.
func (o *orchestrator) reload(ctx context.Context, id string) {
	events, err := o.log.Read(ctx, id, 0, 0)
	if err != nil {
		o.logger.Error("reload failed", "execution_id", id, "error", err)
		return
	}
	st, err := Fold(id, events)
	if err != nil {
		o.logger.Error("reload failed", "execution_id", id, "error", err)
		return
	}
	if ex := o.execs[id]; ex != nil {
		st.res = o.res
		ex.state = st
		if st.Status != StatusRunning {
			o.finish(id, ex)
		}
	}
}

func (o *orchestrator) finish(id string, ex *execution) {
	delete(o.execs, id)
	if o.onFinish != nil {
		o.onFinish(id)
	}
	sum := summarize(ex.state)
	o.mu.Lock()
	o.finished[id] = sum
	if w := o.waiters[id]; w != nil {
		close(w)
		delete(o.waiters, id)
	}
	o.mu.Unlock()
}

// command builds the command a command.issued event stands for.
func (o *orchestrator) command(ex *execution, ev eventlog.Event) *Command {
	s := ex.state
	var p issuedPayload
	if err := decode(ev, &p); err != nil {
		o.logger.Error("bad command.issued", "error", err)
		return nil
	}
	step := s.Playbook.Step(ev.Step)
	if step == nil {
		return nil
	}
	cmd := &Command{
		ExecutionID: s.ExecutionID, ID: ev.CommandID, Base: p.Base, Attempt: ev.Attempt, Kind: p.Kind,
		Step: ev.Step, Run: p.Run, Playbook: s.Playbook, Scope: s.scope(), Args: p.Args,
		Index: p.Index, Slot: p.Slot, Frame: ev.Frame, Rows: p.Rows,
		StartTask: p.StartTask, TaskAttempt: p.TaskAttempt, Carry: p.Carry, NextCall: p.NextCall, Lease: o.lease,
	}
	cmd.PlaybookSource, cmd.PlaybookFile, cmd.PlaybookHash = s.started.Playbook, s.started.File, s.playbookHash()
	if p.Kind == KindShard {
		if l := s.Loops[p.Run]; l != nil {
			cmd.Shards = l.Shards
			cmd.From, cmd.To = shardRange(l.count(), l.Shards, p.Index)
			if l.ItemsRef != nil {
				cmd.ItemsRef = l.ItemsRef
			} else if cmd.To <= len(l.Items) {
				cmd.Item = l.Items[cmd.From:cmd.To:cmd.To]
			}
		}
	}
	if c := s.Commands[p.Base]; c != nil && len(c.Pages) > 0 {
		cmd.Pages = c.Pages
	}
	if p.Kind == KindItem {
		if l := s.Loops[p.Run]; l != nil && l.ItemsRef != nil {
			cmd.ItemsRef, cmd.Count = l.ItemsRef, p.Count
		} else if l != nil && p.Index < len(l.Items) {
			cmd.Item = l.Items[p.Index]
			if p.Count > 0 {
				cmd.Count = p.Count
				cmd.Items = l.Items[p.Index:min(len(l.Items), p.Index+p.Count)]
			}
		}
	}
	if p.Kind == KindFrame {
		if c := s.Commands[p.Base]; c != nil {
			cmd.Rows = c.frameRows()
		}
		if secs := s.frameOf(step).LeaseSeconds; secs > 0 {
			cmd.Lease = time.Duration(secs * float64(time.Second))
		}
	}
	cmd.Pool = step.Spec.Pool
	cmd.Labels = step.Spec.WorkerLabels
	return cmd
}

// send delivers a message to the loop and waits for its reply.
func (o *orchestrator) send(ctx context.Context, m message) error {
	m.reply = make(chan error, 1)
	select {
	case o.inbox <- m:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-m.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Report implements Reporter.
func (o *orchestrator) Report(ctx context.Context, ev eventlog.Event) error {
	return o.send(ctx, message{kind: msgReport, ev: ev})
}

// Heartbeat implements Reporter.
func (o *orchestrator) Heartbeat(ctx context.Context, executionID, commandID string) error {
	select {
	case o.inbox <- message{kind: msgHeartbeat, ev: eventlog.Event{ExecutionID: executionID, CommandID: commandID}}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
