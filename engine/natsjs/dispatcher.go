package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// Tuning of the orchestrator side.
const (
	publishAttempts = 3
	// doneTTL is how long a finished command is remembered for staleness
	// checks of its redelivered message; forgetTTL drops any entry.
	doneTTL   = 10 * time.Minute
	forgetTTL = 2 * time.Hour
	// storedTTL is how long the dispatcher trusts that a playbook source
	// it stored is still in the bucket (an operator may delete the
	// bucket, or the server lose its store) before storing it again.
	storedTTL = 10 * time.Second
	// watchEvery is how often Serve checks that the events consumer
	// still exists.
	watchEvery = 2 * time.Second
)

// Dispatcher is the orchestrator side of the transport: an
// engine.Dispatcher that publishes commands to the pools' subjects, and
// (Serve) the consumer of the workers' reports and heartbeats.
//
// Dispatch never blocks: commands go to an unbounded queue that one
// goroutine publishes asynchronously, in batches.
type Dispatcher struct {
	cfg   Config
	n     names
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	log   *slog.Logger
	stats DispatcherStats

	mu    sync.Mutex
	queue []*engine.Command
	wake  chan struct{}
	// stored holds the playbook hashes stored in the bucket, and when:
	// the most recent maxCachedPlaybooks of them.
	stored *lru.Cache[string, time.Time]
	// reconnects is the connection's reconnect count when the publisher
	// last made sure of the streams and the bucket.
	reconnects uint64

	cmdMu     sync.Mutex
	commands  map[string]*tracked  // "execution/base" → latest attempt
	cancelled map[string]time.Time // executions being cancelled

	// reg knows the live workers, for commands of labelled steps.
	reg *Registry

	// rep is Serve's reporter, through which a command no worker can ever
	// receive is failed at once (refuse); nil before Serve.
	rep atomic.Pointer[engine.Reporter]

	stop   chan struct{}
	done   chan struct{}
	closed atomic.Bool
}

// tracked is what the dispatcher knows of a command, to answer workers'
// staleness checks of redelivered messages.
type tracked struct {
	attempt int
	claimed bool // frame.claimed of this attempt is on record
	done    bool
	at      time.Time
}

// DispatcherStats counts what a Dispatcher did (read with Stats).
type DispatcherStats struct {
	Dispatched, PublishFailed atomic.Int64
	// Targeted counts commands sent to one labelled worker; Untargeted
	// those of labelled steps sent to the pool because no worker with the
	// labels was alive.
	Targeted, Untargeted atomic.Int64
	// CommandBytes sums the sizes of the command messages published;
	// MaxCommandBytes is the largest.
	CommandBytes, MaxCommandBytes atomic.Int64
	Reports, Stale, Retried       atomic.Int64
	Heartbeats, Checks, CheckDrop atomic.Int64
}

var _ engine.Dispatcher = (*Dispatcher)(nil)

// NewDispatcher creates (or updates) the streams and the bucket and starts
// the publisher. Close stops it.
func NewDispatcher(ctx context.Context, cfg Config) (*Dispatcher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	js, kv, n, err := setup(ctx, cfg)
	if err != nil {
		return nil, err
	}
	reg, err := NewRegistry(cfg)
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		cfg: cfg, n: n, js: js, kv: kv, log: cfg.Logger, reg: reg,
		wake: make(chan struct{}, 1), stored: newCache[time.Time](), commands: map[string]*tracked{}, cancelled: map[string]time.Time{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	reg.onGone = d.purgeWorker
	go d.publish()
	return d, nil
}

// Workers implements engine.WorkerLister: the workers reporting their
// capacity.
func (d *Dispatcher) Workers(ctx context.Context) ([]engine.WorkerInfo, error) {
	return d.reg.Workers(ctx)
}

// purgeWorker drops the commands left for a worker that is gone: the
// engine re-issues them to another worker when their lease runs out.
func (d *Dispatcher) purgeWorker(w engine.WorkerInfo) {
	if !ValidPool(w.Pool) || !namePattern.MatchString(w.ID) {
		return
	}
	subj := d.n.cmdPrefix + w.Pool + "." + w.ID
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := d.js.Stream(ctx, d.n.cmdStream)
	if err == nil {
		err = st.Purge(ctx, jetstream.WithPurgeSubject(subj))
	}
	if err != nil {
		d.log.Warn("natsjs: purge the commands of a gone worker", "worker", w.ID, "error", err)
		return
	}
	d.log.Info("natsjs: worker gone; its queued commands are left to their leases", "worker", w.ID, "pool", w.Pool)
}

// Stats returns the dispatcher's counters.
func (d *Dispatcher) Stats() *DispatcherStats { return &d.stats }

// Durable implements engine.Dispatcher: JetStream keeps commands across
// orchestrator restarts, so a resuming orchestrator waits for leases
// instead of re-issuing at once.
func (d *Dispatcher) Durable() bool { return true }

// Dispatch implements engine.Dispatcher. It queues cmd and returns.
func (d *Dispatcher) Dispatch(cmd *engine.Command) {
	if d.closed.Load() {
		return
	}
	base, attempt := splitID(cmd.ID)
	d.cmdMu.Lock()
	d.commands[cmd.ExecutionID+"/"+base] = &tracked{attempt: attempt, at: time.Now()}
	d.cmdMu.Unlock()
	d.mu.Lock()
	d.queue = append(d.queue, cmd)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Cancel implements engine.Dispatcher: it announces on <prefix>.cancel
// (core NATS, at most once: the engine repeats the announcement while
// commands of the execution are in flight) that an execution is being
// cancelled, for every worker to stop its commands.
func (d *Dispatcher) Cancel(executionID string) {
	if d.closed.Load() {
		return
	}
	d.cmdMu.Lock()
	if _, ok := d.cancelled[executionID]; !ok {
		d.cancelled[executionID] = time.Now()
	}
	d.cmdMu.Unlock()
	b, _ := json.Marshal(heartbeatMsg{ExecutionID: executionID})
	if err := d.cfg.Conn.Publish(d.n.cancel, b); err != nil {
		d.log.Warn("natsjs: announcing a cancel failed; it is announced again shortly", "execution_id", executionID, "error", err)
	}
}

// Close stops the publisher after it published what was queued (a
// command it cannot publish is re-issued by the engine when its lease runs
// out). Close the engine first, so nothing is dispatched after.
func (d *Dispatcher) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	close(d.stop)
	<-d.done
	return d.reg.Close()
}

func (d *Dispatcher) publish() {
	defer close(d.done)
	stopping := false
	for {
		d.mu.Lock()
		batch := d.queue
		d.queue = nil
		d.mu.Unlock()
		if len(batch) > 0 {
			d.publishBatch(batch)
			continue
		}
		if stopping {
			return
		}
		select {
		case <-d.wake:
		case <-d.stop:
			stopping = true
		}
	}
}

// publishBatch publishes commands asynchronously and waits for their
// acknowledgements, retrying failures a few times.
func (d *Dispatcher) publishBatch(batch []*engine.Command) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r := d.cfg.Conn.Stats().Reconnects; r != d.reconnects {
		// The server may have come back without its store.
		d.reconnects = r
		d.reensure(ctx)
	}
	for attempt := 1; len(batch) > 0; attempt++ {
		type pending struct {
			cmd *engine.Command
			f   jetstream.PubAckFuture
		}
		var futures []pending
		var failed []*engine.Command
		for _, cmd := range batch {
			msg, err := d.message(ctx, cmd)
			if errors.Is(err, nats.ErrMaxPayload) {
				d.refuse(ctx, cmd, fmt.Sprintf("its playbook is %d bytes", len(cmd.PlaybookSource)))
				continue
			}
			if err != nil {
				d.log.Error("natsjs: cannot publish command", "command_id", cmd.ID, "execution_id", cmd.ExecutionID, "error", err)
				failed = append(failed, cmd)
				continue
			}
			f, err := d.js.PublishMsgAsync(msg, jetstream.WithMsgID(cmd.ExecutionID+"/"+cmd.ID))
			if errors.Is(err, nats.ErrMaxPayload) {
				d.refuse(ctx, cmd, fmt.Sprintf("the command is %d bytes", len(msg.Data)))
				continue
			}
			if err != nil {
				d.log.Warn("natsjs: command publish failed", "command_id", cmd.ID, "error", err)
				failed = append(failed, cmd)
				continue
			}
			futures = append(futures, pending{cmd, f})
		}
		for _, p := range futures {
			select {
			case <-p.f.Ok():
				d.stats.Dispatched.Add(1)
			case err := <-p.f.Err():
				d.log.Warn("natsjs: command publish failed", "command_id", p.cmd.ID, "error", err)
				failed = append(failed, p.cmd)
			case <-ctx.Done():
				failed = append(failed, p.cmd)
			}
		}
		if len(failed) == 0 {
			return
		}
		if attempt >= publishAttempts || ctx.Err() != nil {
			// The engine re-issues these when their lease runs out.
			d.stats.PublishFailed.Add(int64(len(failed)))
			d.log.Error("natsjs: giving up publishing commands; their leases will re-issue them", "commands", len(failed))
			return
		}
		batch = failed
		// The streams or the bucket may be gone (deleted, or the server
		// restarted on an empty store): make them again before retrying.
		d.reensure(ctx)
		select {
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// refuse fails a command larger than the server takes in one message:
// no worker can ever receive it, so waiting for its lease to run out
// max_attempts times would only delay the failure and hide its cause.
// Before Serve there is no reporter to fail it through: its lease does.
func (d *Dispatcher) refuse(ctx context.Context, cmd *engine.Command, what string) {
	d.stats.PublishFailed.Add(1)
	msg := fmt.Sprintf("natsjs: %s, more than the NATS server takes in one message (max_payload %d), "+
		"so no worker can receive the command: keep large values out of the playbook, the workload and the step results "+
		"(engine.Config.Results stores large results apart) or raise the server's max_payload", what, d.cfg.Conn.MaxPayload())
	d.log.Error(msg, "command_id", cmd.ID, "execution_id", cmd.ExecutionID)
	rep := d.rep.Load()
	if rep == nil {
		return
	}
	if err := (&engine.Worker{ID: "natsjs-dispatcher"}).Fail(ctx, cmd, *rep, msg); err != nil {
		d.log.Warn("natsjs: failing a command too large to publish; its lease re-issues it", "command_id", cmd.ID, "error", err)
	}
}

// reensure creates the streams and the bucket if they are gone, and
// forgets which playbooks were stored, so the next commands store theirs
// again. Called by the publisher only.
func (d *Dispatcher) reensure(ctx context.Context) {
	kv, err := ensure(ctx, d.js, d.cfg, d.n)
	if err != nil {
		d.log.Warn("natsjs: cannot make sure of the streams and the bucket", "error", err)
		return
	}
	d.kv = kv
	d.stored.Purge()
}

// message builds the command's message, storing its playbook source in
// the bucket first if this dispatcher has not yet.
func (d *Dispatcher) message(ctx context.Context, cmd *engine.Command) (*nats.Msg, error) {
	if at, ok := d.stored.Get(cmd.PlaybookHash); !ok || time.Since(at) > storedTTL {
		if cmd.PlaybookSource == "" {
			return nil, errors.New("command carries no playbook source")
		}
		if _, err := d.kv.Create(ctx, cmd.PlaybookHash, []byte(cmd.PlaybookSource)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("store playbook %s: %w", cmd.PlaybookHash, err)
		}
		d.stored.Add(cmd.PlaybookHash, time.Now())
	}
	b, err := engine.EncodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	d.stats.CommandBytes.Add(int64(len(b)))
	for m := d.stats.MaxCommandBytes.Load(); int64(len(b)) > m && !d.stats.MaxCommandBytes.CompareAndSwap(m, int64(len(b))); m = d.stats.MaxCommandBytes.Load() {
	}
	return &nats.Msg{Subject: d.subject(cmd), Data: b}, nil
}

// subject is where cmd goes: to a live worker of its pool with the step's
// labels, or to the pool.
func (d *Dispatcher) subject(cmd *engine.Command) string {
	pool := poolOf(cmd.Pool)
	if len(cmd.Labels) > 0 {
		if id, ok := d.reg.pick(pool, cmd.Labels); ok {
			d.stats.Targeted.Add(1)
			return d.n.cmdPrefix + pool + "." + id
		}
		d.stats.Untargeted.Add(1)
		d.log.Debug("natsjs: no live worker with the step's labels; sending to the pool", "command_id", cmd.ID, "pool", pool, "labels", cmd.Labels)
	}
	return d.n.cmdPrefix + pool
}

// Serve consumes the workers' reports, heartbeats and staleness checks and
// hands them to rep (the engine's Reporter) until ctx is done. Run it on
// the one orchestrator that drives the executions, after it resumed them:
// a report for an execution rep does not know is dropped as stale.
//
// Reports are recorded concurrently (at most DefaultEventConcurrency at
// once), so the engine folds many into one
// append. A report is acknowledged once rep.Report returned nil or
// ErrStale (stale reports are dropped) and negatively acknowledged on any
// other error, to be delivered again.
func (d *Dispatcher) Serve(ctx context.Context, rep engine.Reporter) error {
	d.rep.Store(&rep)
	defer d.rep.Store(nil)
	nc := d.cfg.Conn
	hb, err := nc.Subscribe(d.n.hb, func(m *nats.Msg) {
		var h heartbeatMsg
		if json.Unmarshal(m.Data, &h) != nil {
			return
		}
		d.stats.Heartbeats.Add(1)
		_ = rep.Heartbeat(ctx, h.ExecutionID, h.CommandID)
	})
	if err != nil {
		return fmt.Errorf("natsjs: subscribe %s: %w", d.n.hb, err)
	}
	// Unsubscribing fails only on a closed connection, which has dropped the
	// subscription already.
	defer func() { _ = hb.Unsubscribe() }()
	_ = hb.SetPendingLimits(1<<20, 256<<20)
	check, err := nc.Subscribe(d.n.check, func(m *nats.Msg) {
		var h heartbeatMsg
		if json.Unmarshal(m.Data, &h) != nil {
			return
		}
		d.stats.Checks.Add(1)
		v := d.vouch(ctx, rep, h.ExecutionID, h.CommandID, d.check(h.ExecutionID, h.CommandID))
		if v != checkRun {
			d.stats.CheckDrop.Add(1)
		}
		_ = m.Respond([]byte(v))
	})
	if err != nil {
		return fmt.Errorf("natsjs: subscribe %s: %w", d.n.check, err)
	}
	defer func() { _ = check.Unsubscribe() }() // as hb above

	sem := make(chan struct{}, DefaultEventConcurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	chain, err := nc.Subscribe(d.n.chain, func(m *nats.Msg) {
		// Recorded concurrently, like the stream's reports, so the engine
		// folds many into one append.
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			d.recordChained(ctx, rep, m)
		})
	})
	if err != nil {
		return fmt.Errorf("natsjs: subscribe %s: %w", d.n.chain, err)
	}
	defer func() { _ = chain.Unsubscribe() }() // as hb above
	var order commandOrder
	handle := func(m jetstream.Msg) {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			_ = m.Nak()
			return
		}
		// Called in stream order: a command's reports are recorded in it.
		prev, done := order.enter(m.Headers().Get(headerCommand))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer done()
			if prev != nil {
				<-prev
			}
			d.record(ctx, rep, m)
		}()
	}
	cons, cc, err := d.consume(ctx, handle)
	if err != nil {
		return err
	}
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	watch := time.NewTicker(watchEvery)
	defer watch.Stop()
	for {
		select {
		case <-ctx.Done():
			cc.Stop()
			wg.Wait()
			return nil
		case <-sweep.C:
			d.sweep()
		case <-watch.C:
			// An operator may delete the events stream or the consumer,
			// and a server restarted on an empty store has neither:
			// consuming on would wait for reports forever.
			ictx, cancel := context.WithTimeout(ctx, watchEvery)
			_, err := cons.Info(ictx)
			cancel()
			if err == nil || !gone(err) {
				continue
			}
			d.log.Warn("natsjs: the events consumer is gone (deleted, or the NATS server lost its store); creating it again",
				"stream", d.n.evtStream, "error", err)
			ncons, ncc, err := d.consume(ctx, handle)
			if err != nil {
				if ctx.Err() == nil {
					d.log.Warn("natsjs: cannot consume the events stream; trying again shortly", "error", err)
				}
				continue
			}
			cc.Stop()
			cons, cc = ncons, ncc
		}
	}
}

// consume makes sure of the streams and the events consumer and consumes
// it with handle.
func (d *Dispatcher) consume(ctx context.Context, handle jetstream.MessageHandler) (jetstream.Consumer, jetstream.ConsumeContext, error) {
	if _, err := ensure(ctx, d.js, d.cfg, d.n); err != nil {
		return nil, nil, err
	}
	cons, err := d.js.CreateOrUpdateConsumer(ctx, d.n.evtStream, jetstream.ConsumerConfig{
		Durable: "orchestrator", AckPolicy: jetstream.AckExplicitPolicy, AckWait: d.cfg.EventAckWait,
		MaxAckPending: 4 * DefaultEventConcurrency, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("natsjs: events consumer: %w", err)
	}
	cc, err := cons.Consume(handle, jetstream.PullMaxMessages(DefaultEventConcurrency),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() == nil && !errors.Is(err, nats.ErrConnectionClosed) {
				d.log.Debug("natsjs: consuming events", "error", err)
			}
		}))
	if err != nil {
		return nil, nil, fmt.Errorf("natsjs: consume events: %w", err)
	}
	return cons, cc, nil
}

// record hands one report to the engine and settles its message.
func (d *Dispatcher) record(ctx context.Context, rep engine.Reporter, m jetstream.Msg) {
	var ev eventlog.Event
	if err := json.Unmarshal(m.Data(), &ev); err != nil {
		d.log.Error("natsjs: dropping undecodable report", "error", err)
		_ = m.Term()
		return
	}
	err := rep.Report(ctx, ev)
	verdict := verdictOK
	switch {
	case err == nil:
		d.stats.Reports.Add(1)
		d.accepted(ev)
	case errors.Is(err, engine.ErrStale), errors.Is(err, engine.ErrUnknownExecution):
		// Unknown: the execution finished (or is not driven here, which
		// Serve's contract rules out), so the report is late.
		d.stats.Stale.Add(1)
		verdict = verdictStale
	default:
		d.stats.Retried.Add(1)
		if ctx.Err() == nil {
			d.log.Warn("natsjs: report not recorded; it will be delivered again", "command_id", ev.CommandID, "type", ev.Type, "error", err)
		}
		_ = m.NakWithDelay(200 * time.Millisecond)
		return
	}
	if err := m.Ack(); err != nil {
		d.log.Debug("natsjs: ack report", "error", err)
	}
	if reply := m.Headers().Get(headerReply); reply != "" {
		_ = d.cfg.Conn.Publish(reply, []byte(verdict))
	}
}

// recordChained hands a chained report (a request on <prefix>.chain) to
// the engine and answers with the slot's next command, verdictOK (the
// frame.done is recorded, no next frame), verdictStale or verdictRetry.
// Chained reports bypass the events stream: a worker that gets no answer
// reports the frame.done alone, durably.
func (d *Dispatcher) recordChained(ctx context.Context, rep engine.Reporter, m *nats.Msg) {
	done, claimed, err := decodeChained(m)
	if err != nil {
		d.log.Error("natsjs: dropping undecodable chained report", "error", err)
		_ = m.Respond([]byte(verdictRetry))
		return
	}
	verdict := []byte(verdictRetry)
	var cmd *engine.Command
	if cr, ok := rep.(engine.ChainReporter); ok {
		cmd, err = cr.ReportChained(ctx, done, claimed)
	} else {
		err = errors.New("natsjs: the reporter cannot chain frames")
	}
	switch {
	case err == nil:
		d.stats.Reports.Add(1)
		d.accepted(done)
		verdict = []byte(verdictOK)
		if cmd != nil {
			if b, eerr := engine.EncodeCommand(cmd); eerr == nil {
				verdict = b
			} else {
				// The next frame's claim is on record: it is re-issued with
				// its rows once its lease runs out.
				d.log.Error("natsjs: cannot encode a chained command", "command_id", cmd.ID, "error", eerr)
			}
		}
	case errors.Is(err, engine.ErrStale), errors.Is(err, engine.ErrUnknownExecution):
		d.stats.Stale.Add(1)
		verdict = []byte(verdictStale)
	default:
		d.stats.Retried.Add(1)
		if ctx.Err() == nil {
			d.log.Warn("natsjs: chained report not recorded; the worker reports the frame alone", "command_id", done.CommandID, "error", err)
		}
	}
	_ = m.Respond(verdict)
}

// accepted notes a recorded report for staleness checks.
func (d *Dispatcher) accepted(ev eventlog.Event) {
	base, attempt := splitID(ev.CommandID)
	key := ev.ExecutionID + "/" + base
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	t := d.commands[key]
	if t == nil || t.attempt != attempt {
		return
	}
	switch ev.Type {
	case eventlog.TypeFrameClaimed:
		t.claimed = true
	case eventlog.TypeFrameDone, eventlog.TypeCommandCompleted, eventlog.TypeCommandFailed:
		t.done = true
		t.at = time.Now()
	}
}

// check answers a worker that received a redelivered command, or one
// that waited in the stream half its lease or more.
func (d *Dispatcher) check(executionID, commandID string) string {
	base, attempt := splitID(commandID)
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	t := d.commands[executionID+"/"+base]
	_, cancelled := d.cancelled[executionID]
	switch {
	case t == nil:
		return checkUnknown
	case attempt != t.attempt || t.done:
		return verdictStale
	case t.claimed:
		// Even while cancelling: the recorded rows come back with the
		// engine's settling attempt, not with this delivery.
		return checkClaimed
	case cancelled:
		return checkCancelled
	}
	return checkRun
}

// vouchTimeout bounds the engine's answer to a staleness check; a check
// it does not answer in time is answered stale (the engine's lease
// re-issues the command if it was current after all).
const vouchTimeout = time.Second

// vouch confirms verdict v of a staleness check with the engine when its
// Reporter answers at once (engine.Voucher): an attempt the dispatcher's
// table calls current (to run, or to settle a cancel) may be one the engine
// is re-issuing at this moment, and a worker that ran it on the table's
// word alone would run it beside its successor. The engine's answer renews
// the attempt's lease in the same step, so it is not re-issued once
// vouched for; an attempt it refuses (or does not answer for in time) is
// stale.
func (d *Dispatcher) vouch(ctx context.Context, rep engine.Reporter, executionID, commandID, v string) string {
	vr, ok := rep.(engine.Voucher)
	if !ok || (v != checkRun && v != checkCancelled) {
		return v
	}
	vctx, cancel := context.WithTimeout(ctx, vouchTimeout)
	defer cancel()
	if err := vr.Vouch(vctx, executionID, commandID); err != nil {
		if !errors.Is(err, engine.ErrStale) {
			d.log.Warn("natsjs: the engine did not vouch for a command in time; dropping it (its lease re-issues it)",
				"command_id", commandID, "execution_id", executionID, "error", err)
		}
		return verdictStale
	}
	return v
}

func (d *Dispatcher) sweep() {
	now := time.Now()
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	for k, t := range d.commands {
		if (t.done && now.Sub(t.at) > doneTTL) || now.Sub(t.at) > forgetTTL {
			delete(d.commands, k)
		}
	}
	for id, at := range d.cancelled {
		if now.Sub(at) > forgetTTL {
			delete(d.cancelled, id)
		}
	}
}

// splitID splits a command id "base@attempt".
func splitID(id string) (string, int) {
	i := strings.LastIndexByte(id, '@')
	if i < 0 {
		return id, 0
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return id, 0
	}
	return id[:i], n
}
