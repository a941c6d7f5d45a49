package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/singleflight"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// fetchWait bounds one pull request, so a stopping worker stops fetching
// within it.
const fetchWait = 500 * time.Millisecond

// reportOverhead is room left in a NATS message for a report's headers.
const reportOverhead = 1 << 10

// ErrNoVerdict is returned by a worker's report of frame.claimed when the
// orchestrator did not answer within Config.ReportTimeout. The frame's
// claim is aborted; if it was recorded after all, the engine re-issues
// the frame with its rows once the frame's heartbeats stop.
var ErrNoVerdict = errors.New("natsjs: no verdict from the orchestrator")

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// Worker runs the commands (tools, cursor drivers, keychain).
	// Required.
	Worker *engine.Worker
	// Pool is the pool this worker serves: it receives the commands of
	// steps whose spec.pool names it. Defaults to DefaultPool ("default").
	Pool string
	// Concurrency bounds the commands run at once. Defaults to
	// DefaultConcurrency (8).
	Concurrency int
	// Grace is how long Run, once its context is cancelled, lets running
	// commands finish before cancelling them. Defaults to DefaultGrace
	// (30s).
	Grace time.Duration
	// CheckTimeout bounds the staleness check of a redelivered command (or
	// of one that waited in the stream half its lease or more); a command
	// the orchestrator does not vouch for in time is dropped (the engine
	// re-issues it when its lease runs out). Defaults to
	// DefaultCheckTimeout (2s).
	CheckTimeout time.Duration
	// Labels describe the worker (gpu: "a100", region: "eu", ...): steps
	// whose spec.worker_labels it has are sent to it (or to another
	// worker of the pool with them). A worker with labels takes the
	// commands sent to it alone besides its pool's; its Worker.ID must
	// then be letters, digits, '-' and '_' only.
	Labels map[string]string
	// CapacityEvery is how often the worker reports its capacity (pool,
	// labels, free slots) on <prefix>.workers. Defaults to
	// DefaultCapacityEvery (2s).
	CapacityEvery time.Duration
	// MissedHeartbeats is the engine's Config.MissedHeartbeats: a command
	// that has heartbeated is re-issued to another worker after that many
	// heartbeat intervals without one. A worker that cannot reach the NATS
	// server for one interval fewer (at least one) stops the command: its
	// context is cancelled with ErrCutOff, as at the end of the grace
	// period, so that it does not run on beside the attempt the engine
	// issues elsewhere. Defaults to engine.DefaultMissedHeartbeats (3);
	// negative: never stop (the engine still refuses the late reports).
	MissedHeartbeats int
}

// ErrCutOff is the cause of the context of a command a worker stopped
// because it could not reach the NATS server for nearly as long as the
// engine waits before re-issuing the command (WorkerOptions.MissedHeartbeats):
// the command is left to the attempt the engine issues to another worker.
var ErrCutOff = errors.New("natsjs: the worker was cut off from NATS; the command is left to the engine's re-issue")

// WorkerStats counts what a Worker did (read with Stats).
type WorkerStats struct {
	// Executed counts commands run to the end; Redelivered the messages
	// delivered more than once; Aged the messages delivered for the first
	// time after waiting in the stream half their command's lease or more
	// (their command may have been re-issued meanwhile). Both are checked
	// with the orchestrator: Dropped counts those not run because it
	// called them stale (or could not vouch for them).
	Executed, Redelivered, Aged, Dropped atomic.Int64
	// Abandoned counts commands handed back at the end of the grace
	// period; Failed those reported failed without running (playbook
	// source missing or invalid, a panic); CutOff those stopped because
	// the worker could not reach the NATS server (ErrCutOff).
	Abandoned, Failed, CutOff atomic.Int64
	// MaxReportBytes is the largest report message published;
	// TooLarge counts results that did not fit a NATS message and were
	// reported as the command's failure.
	MaxReportBytes, TooLarge atomic.Int64
	// Chained counts frames a slot ran on the command handed back with
	// the report of the frame before (engine.ChainReporter);
	// ChainRetries the chained reports sent again for want of an answer
	// or after an answer that they were not recorded.
	Chained, ChainRetries atomic.Int64
}

// Worker is the worker side of the transport: it pulls its pool's
// commands, runs them with an engine.Worker and sends reports and
// heartbeats back.
type Worker struct {
	cfg  Config
	opts WorkerOptions
	n    names
	js   jetstream.JetStream
	kv   jetstream.KeyValue
	cons jetstream.Consumer
	log  *slog.Logger

	stats WorkerStats

	playbooks *lru.Cache[string, *dsl.Playbook] // parsed, by hash; the most recent maxCachedPlaybooks
	pbGroup   singleflight.Group

	inbox    string
	vmu      sync.Mutex
	verdicts map[string]chan string
	vseq     atomic.Int64

	// direct is the consumer of the commands sent to this worker alone
	// (nil without Labels).
	direct  jetstream.Consumer
	started time.Time
	// now is the worker's clock, read against the NATS server's timestamps
	// of command messages (so the wall clock, not engine.Worker.Clock,
	// which a test may fake).
	now func() time.Time
	// running counts the commands running now.
	running atomic.Int64
}

// NewWorker creates (or updates) the streams, the bucket and the pool's
// consumer. Run pulls commands.
func NewWorker(ctx context.Context, cfg Config, opts WorkerOptions) (*Worker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Worker == nil {
		return nil, fmt.Errorf("%w: WorkerOptions.Worker is required", ErrConfig)
	}
	opts.Pool = poolOf(opts.Pool)
	if !ValidPool(opts.Pool) {
		return nil, fmt.Errorf("%w: WorkerOptions.Pool %q: letters, digits, '-' and '_' only", ErrConfig, opts.Pool)
	}
	if opts.Concurrency < 0 || opts.Grace < 0 || opts.CheckTimeout < 0 {
		return nil, fmt.Errorf("%w: WorkerOptions.Concurrency, Grace and CheckTimeout must not be negative", ErrConfig)
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	if opts.CheckTimeout == 0 {
		opts.CheckTimeout = DefaultCheckTimeout
	}
	if opts.CapacityEvery < 0 {
		return nil, fmt.Errorf("%w: WorkerOptions.CapacityEvery must not be negative", ErrConfig)
	}
	if opts.CapacityEvery == 0 {
		opts.CapacityEvery = DefaultCapacityEvery
	}
	if opts.MissedHeartbeats == 0 {
		opts.MissedHeartbeats = engine.DefaultMissedHeartbeats
	}
	if len(opts.Labels) > 0 && !namePattern.MatchString(opts.Worker.ID) {
		return nil, fmt.Errorf("%w: a worker with labels needs a Worker.ID of letters, digits, '-' and '_' (it names its subject), not %q", ErrConfig, opts.Worker.ID)
	}
	js, kv, n, err := setup(ctx, cfg)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		cfg: cfg, opts: opts, n: n, js: js, kv: kv, log: cfg.Logger,
		playbooks: newCache[*dsl.Playbook](), inbox: cfg.Conn.NewRespInbox(), verdicts: map[string]chan string{},
		started: time.Now(), now: time.Now,
	}
	if w.cons, err = js.CreateOrUpdateConsumer(ctx, n.cmdStream, w.consumerConfig(false)); err != nil {
		return nil, fmt.Errorf("natsjs: consumer of pool %s: %w", opts.Pool, err)
	}
	if len(opts.Labels) > 0 {
		// Commands for this worker alone. The consumer goes away a while
		// after the worker does; commands left for it are re-issued by the
		// engine when their lease runs out, and the dispatcher purges them.
		if w.direct, err = js.CreateOrUpdateConsumer(ctx, n.cmdStream, w.consumerConfig(true)); err != nil {
			return nil, fmt.Errorf("natsjs: consumer of worker %s: %w", opts.Worker.ID, err)
		}
	}
	return w, nil
}

// consumerConfig is the configuration of the pool's consumer, or of the
// consumer of the commands sent to this worker alone (direct).
func (w *Worker) consumerConfig(direct bool) jetstream.ConsumerConfig {
	if direct {
		return jetstream.ConsumerConfig{
			Durable: "worker-" + w.opts.Worker.ID, FilterSubject: w.directSubject(),
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: w.cfg.AckWait, MaxAckPending: -1,
			InactiveThreshold: max(time.Minute, 10*w.opts.CapacityEvery),
		}
	}
	return jetstream.ConsumerConfig{
		Durable: "pool-" + w.opts.Pool, FilterSubject: w.n.cmdPrefix + w.opts.Pool,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: w.cfg.AckWait, MaxAckPending: -1,
	}
}

// watchConsumer is how often an idle or failing fetch loop checks that its
// consumer still exists.
const watchConsumer = 2 * time.Second

// recreate makes the streams, the bucket and the consumer again if the
// consumer is gone (an operator deleted it or its stream, or the server
// came back without its store); it returns the consumer to fetch from.
func (w *Worker) recreate(ctx context.Context, cons jetstream.Consumer) jetstream.Consumer {
	cctx, cancel := context.WithTimeout(ctx, watchConsumer)
	defer cancel()
	_, err := cons.Info(cctx)
	if err == nil || !gone(err) {
		return cons
	}
	cfg := w.consumerConfig(cons.CachedInfo().Config.Durable != "pool-"+w.opts.Pool)
	w.log.Warn("natsjs: the worker's consumer is gone (deleted, or the NATS server lost its store); creating it again",
		"pool", w.opts.Pool, "consumer", cfg.Durable, "error", err)
	if _, err := ensure(cctx, w.js, w.cfg, w.n); err != nil {
		w.log.Warn("natsjs: cannot create the streams again; trying again shortly", "error", err)
		return cons
	}
	ncons, err := w.js.CreateOrUpdateConsumer(cctx, w.n.cmdStream, cfg)
	if err != nil {
		w.log.Warn("natsjs: cannot create the consumer again; trying again shortly", "consumer", cfg.Durable, "error", err)
		return cons
	}
	return ncons
}

// directSubject is the subject of the commands sent to this worker alone.
func (w *Worker) directSubject() string {
	return w.n.cmdPrefix + w.opts.Pool + "." + w.opts.Worker.ID
}

// Stats returns the worker's counters.
func (w *Worker) Stats() *WorkerStats { return &w.stats }

// Run pulls and runs commands until ctx is cancelled, then stops
// gracefully: it stops fetching, lets running commands finish for up to
// Grace, then cancels them and hands their messages back (Nak) so another
// worker runs them at once — except a frame whose claimed rows are already
// on record, which is left to the engine's lease, whose re-issue carries
// those rows. Run returns once no command runs.
func (w *Worker) Run(ctx context.Context) error {
	sub, err := w.cfg.Conn.Subscribe(w.inbox+".*", w.onVerdict)
	if err != nil {
		return fmt.Errorf("natsjs: subscribe to verdicts: %w", err)
	}
	// Unsubscribing fails only on a closed connection, which has dropped the
	// subscription already.
	defer func() { _ = sub.Unsubscribe() }()
	cancels, err := w.cfg.Conn.Subscribe(w.n.cancel, func(m *nats.Msg) {
		var c heartbeatMsg
		if json.Unmarshal(m.Data, &c) == nil && c.ExecutionID != "" {
			w.opts.Worker.Cancel(c.ExecutionID)
		}
	})
	if err != nil {
		return fmt.Errorf("natsjs: subscribe to cancels: %w", err)
	}
	defer func() { _ = cancels.Unsubscribe() }() // as sub above

	hard, hardCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hardCancel()
	conc := w.opts.Concurrency
	slots := make(chan struct{}, conc)
	for range conc {
		slots <- struct{}{}
	}
	stopReports := w.reportCapacity(slots)
	defer stopReports()
	var wg sync.WaitGroup
	var loops sync.WaitGroup
	for _, cons := range []jetstream.Consumer{w.cons, w.direct} {
		if cons == nil {
			continue
		}
		loops.Add(1)
		go func() {
			defer loops.Done()
			w.fetch(ctx, hard, cons, slots, &wg)
		}()
	}
	loops.Wait()
	// Stopping: the frames running finish without claiming more rows.
	w.opts.Worker.Drain()
	idle := make(chan struct{})
	go func() { wg.Wait(); close(idle) }()
	select {
	case <-idle:
	case <-time.After(w.opts.Grace):
		w.log.Warn("natsjs: grace period over; handing running commands back", "pool", w.opts.Pool)
		hardCancel()
		<-idle
	}
	return nil
}

// fetch pulls commands from cons while slots are free, until ctx is done;
// each runs in its own goroutine (counted in wg) with the hard context.
func (w *Worker) fetch(ctx, hard context.Context, cons jetstream.Consumer, slots chan struct{}, wg *sync.WaitGroup) {
	conc := cap(slots)
	var checked time.Time
	for {
		// Stopping wins over a free slot: select picks at random among
		// ready cases, and each fetch started after the stop holds the
		// worker up to fetchWait longer (about 1.5 s when the server is
		// gone).
		if ctx.Err() != nil {
			return
		}
		select {
		case <-slots:
		case <-ctx.Done():
			return
		}
		n := 1
	more:
		for n < conc {
			select {
			case <-slots:
				n++
			default:
				break more
			}
		}
		batch, err := cons.Fetch(n, jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			for range n {
				slots <- struct{}{}
			}
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("natsjs: fetch failed", "pool", w.opts.Pool, "error", err)
			cons = w.recreate(ctx, cons)
			checked = time.Now()
			select {
			case <-time.After(fetchWait):
			case <-ctx.Done():
			}
			continue
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			if ctx.Err() != nil {
				_ = msg.Nak()
				slots <- struct{}{}
				continue
			}
			wg.Add(1)
			w.running.Add(1)
			go func() {
				defer wg.Done()
				defer func() { slots <- struct{}{} }()
				defer w.running.Add(-1)
				w.handle(hard, msg)
			}()
		}
		received := got
		for ; got < n; got++ {
			slots <- struct{}{}
		}
		err = batch.Error()
		if err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			w.log.Debug("natsjs: fetch ended", "pool", w.opts.Pool, "error", err)
		}
		// A fetch from a consumer that is gone ends without messages and,
		// depending on the server, without an error: check now and then
		// while nothing comes.
		if received == 0 && ctx.Err() == nil && time.Since(checked) >= watchConsumer {
			cons = w.recreate(ctx, cons)
			checked = time.Now()
		}
	}
}

// reportCapacity publishes the worker's capacity every CapacityEvery, and
// at once when a registry asks, until the returned stop is called; stop
// publishes a last report saying the worker is gone.
func (w *Worker) reportCapacity(slots chan struct{}) (stop func()) {
	host, _ := os.Hostname()
	every := w.opts.CapacityEvery
	publish := func(gone bool) {
		// Slots taken by a fetch still waiting for messages are free.
		running := int(w.running.Load())
		msg := capacityMsg{
			WorkerInfo: engine.WorkerInfo{ID: w.opts.Worker.ID, Pool: w.opts.Pool, Labels: w.opts.Labels,
				Slots: cap(slots), Free: max(0, cap(slots)-running), Running: running, Host: host, StartedAt: w.started},
			EveryMs: every.Milliseconds(), Direct: w.direct != nil, Gone: gone,
		}
		b, _ := json.Marshal(msg)
		// At most once: a lost report is made up by the next.
		_ = w.cfg.Conn.Publish(w.n.workers, b)
	}
	ping, err := w.cfg.Conn.Subscribe(w.n.workersPing, func(*nats.Msg) { publish(false) })
	if err != nil {
		w.log.Warn("natsjs: subscribe to capacity pings", "error", err)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		publish(false)
		for {
			select {
			case <-done:
				return
			case <-t.C:
				publish(false)
			}
		}
	}()
	return func() {
		if ping != nil {
			_ = ping.Unsubscribe()
		}
		close(done)
		<-stopped
		publish(true)
	}
}

// handle runs one command message to its end and settles it.
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	cmd, err := engine.DecodeCommand(msg.Data())
	if err != nil {
		w.log.Error("natsjs: dropping undecodable command", "error", err)
		_ = msg.Term()
		return
	}
	if meta, err := msg.Metadata(); err == nil {
		check := false
		switch {
		case meta.NumDelivered > 1:
			w.stats.Redelivered.Add(1)
			check = true
		case w.aged(cmd, meta.Timestamp):
			w.stats.Aged.Add(1)
			check = true
		}
		if check && !w.vouched(ctx, cmd) {
			w.stats.Dropped.Add(1)
			_ = msg.Term()
			return
		}
	}
	rep := &reporter{w: w}
	pb, err := w.playbook(ctx, cmd)
	if err != nil {
		var perm permanentError
		if errors.As(err, &perm) {
			w.stats.Failed.Add(1)
			if err := w.opts.Worker.Fail(ctx, cmd, rep, err.Error()); err == nil {
				_ = msg.Ack()
				return
			}
		}
		w.log.Warn("natsjs: playbook unavailable; command handed back", "command_id", cmd.ID, "error", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	cmd.Playbook = pb

	// The command runs on cctx, which the fence cancels when the worker is
	// cut off from NATS; ctx stays the worker's.
	cctx, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	stopFence := w.fence(cctx, cmd, cut)
	progress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(max(w.cfg.AckWait/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-progress:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	w.execute(cctx, cmd, rep)
	stopFence()
	if msg := rep.tooLarge.Load(); msg != nil && !rep.finished.Load() && cctx.Err() == nil {
		w.log.Error(*msg, "command_id", cmd.ID, "execution_id", cmd.ExecutionID)
		if err := w.opts.Worker.Fail(ctx, cmd, rep, *msg); err != nil {
			w.log.Warn("natsjs: reporting a frame whose claim is too large; its lease re-issues it", "command_id", cmd.ID, "error", err)
		}
	}
	close(progress)
	<-progressDone

	switch {
	case rep.finished.Load() || cctx.Err() == nil:
		w.stats.Executed.Add(1)
		_ = msg.Ack()
	case rep.claimed.Load() && len(cmd.Rows) == 0:
		// Another delivery of this message would claim fresh rows under
		// the same fencing token; the engine's re-issue brings the recorded
		// ones instead.
		w.stats.Abandoned.Add(1)
		_ = msg.Term()
	default:
		w.stats.Abandoned.Add(1)
		_ = msg.Nak()
	}
}

// fence watches, while cmd runs, that the worker still reaches the NATS
// server: four times per heartbeat interval of cmd, a flush (a round trip
// to the server) bounded by a quarter interval. A flush that succeeds at
// r proves the heartbeats sent before r arrived, the last of them at most
// an interval before r, so the engine re-issues the command no sooner than
// MissedHeartbeats-1 intervals after r. Half an interval before that (at
// least a quarter interval after r), fence cancels ctx with ErrCutOff
// through cut: the engine is about to hand the command to another worker,
// and this attempt's reports would be refused. The command then ends as at
// the end of the grace period (a frame hands back the rows it has not
// started). A connection gone silent (a NAT that forgot it) is noticed
// too, where the client itself notices only after minutes of unanswered
// pings. The returned stop ends the watch without waiting for a flush in
// progress.
func (w *Worker) fence(ctx context.Context, cmd *engine.Command, cut context.CancelCauseFunc) (stop func()) {
	beat := cmd.Heartbeat
	if beat <= 0 {
		beat = cmd.Lease / dsl.HeartbeatsPerLease
	}
	if beat <= 0 || w.opts.MissedHeartbeats < 0 {
		return func() {}
	}
	every := max(beat/4, time.Millisecond)
	after := max(time.Duration(w.opts.MissedHeartbeats-1)*beat-beat/2, every)
	wctx, quit := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		reached := time.Now()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			fctx, cancel := context.WithTimeout(wctx, every)
			err := w.cfg.Conn.FlushWithContext(fctx)
			cancel()
			switch {
			case wctx.Err() != nil:
				return
			case err == nil:
				reached = time.Now()
			case time.Since(reached) >= after:
				w.stats.CutOff.Add(1)
				w.log.Warn("natsjs: cut off from NATS; stopping the command before the engine re-issues it to another worker",
					"command_id", cmd.ID, "execution_id", cmd.ExecutionID, "unreachable_for", time.Since(reached).Round(time.Millisecond), "error", err)
				cut(ErrCutOff)
				return
			}
		}
	}()
	return quit
}

// execute runs cmd, turning a panic into a failure report.
func (w *Worker) execute(ctx context.Context, cmd *engine.Command, rep *reporter) {
	defer func() {
		if r := recover(); r != nil {
			w.stats.Failed.Add(1)
			w.log.Error("natsjs: command panicked", "command_id", cmd.ID, "panic", r, "stack", string(debug.Stack()))
			_ = w.opts.Worker.Fail(ctx, cmd, rep, fmt.Sprintf("panic: %v", r))
		}
	}()
	switch err := w.opts.Worker.Execute(ctx, cmd, rep); {
	case err == nil, ctx.Err() != nil:
	case errors.Is(err, engine.ErrStale), errors.Is(err, engine.ErrUnknownExecution):
		// Expected after a stall or a lease run out, and what an operator
		// looking for a slow worker wants to see.
		w.log.Info("natsjs: report refused: the command was re-issued or its execution ended; this attempt's outcome is not recorded",
			"command_id", cmd.ID, "error", err)
	default:
		w.log.Warn("natsjs: report refused", "command_id", cmd.ID, "error", err)
	}
}

// agedShare is the share of its lease a command's message may wait in the
// stream and still run on its first delivery without the orchestrator's
// word. The engine re-issues a command no sooner than a whole lease after
// it issued it, so a younger message cannot have been superseded yet; the
// other half absorbs the time between issue and publication and the skew
// between the NATS server's clock and the worker's.
const agedShare = 2

// aged reports whether a command whose message the stream stored at
// stored may have been re-issued while it waited (its workers down, or
// busy): its first delivery is then checked like a redelivery, since the
// engine fences only the reports of a superseded attempt, not its body.
// A fresh message, the usual case, runs without the round trip.
func (w *Worker) aged(cmd *engine.Command, stored time.Time) bool {
	if cmd.Lease <= 0 {
		// No lease to measure against: it may have been re-issued at any
		// time.
		return true
	}
	return w.now().Sub(stored) >= cmd.Lease/agedShare
}

// vouched asks the orchestrator whether a redelivered (or aged) command
// should run: only if its attempt is still current and, for a frame
// without rows, no claim of it is on record.
func (w *Worker) vouched(ctx context.Context, cmd *engine.Command) bool {
	b, _ := json.Marshal(heartbeatMsg{ExecutionID: cmd.ExecutionID, CommandID: cmd.ID})
	cctx, cancel := context.WithTimeout(ctx, w.opts.CheckTimeout)
	defer cancel()
	reply, err := w.cfg.Conn.RequestWithContext(cctx, w.n.check, b)
	if err != nil {
		w.log.Info("natsjs: no answer on a redelivered or aged command; dropping it", "command_id", cmd.ID, "error", err)
		return false
	}
	switch string(reply.Data) {
	case checkRun:
		return true
	case checkClaimed:
		return len(cmd.Rows) > 0
	case checkCancelled:
		// Current, but its execution is being cancelled: run it knowing
		// that, so it settles at once instead of claiming.
		w.opts.Worker.Cancel(cmd.ExecutionID)
		return true
	}
	w.log.Info("natsjs: dropping a redelivered or aged command", "command_id", cmd.ID, "verdict", string(reply.Data))
	return false
}

// permanentError marks a playbook that can never be run.
type permanentError struct{ error }

// playbook returns the command's parsed playbook, fetching its source from
// the bucket once per hash (again once it fell out of the bounded cache).
func (w *Worker) playbook(ctx context.Context, cmd *engine.Command) (*dsl.Playbook, error) {
	if pb, ok := w.playbooks.Get(cmd.PlaybookHash); ok {
		return pb, nil
	}
	v, err, _ := w.pbGroup.Do(cmd.PlaybookHash, func() (any, error) {
		e, err := w.kv.Get(ctx, cmd.PlaybookHash)
		if err != nil {
			if errors.Is(err, jetstream.ErrKeyNotFound) || gone(err) {
				// Lost with the bucket (deleted, or the server came back
				// without its store): the dispatcher stores it again
				// within storedTTL, or at once after a reconnect, and the
				// engine re-issues the command once its lease runs out.
				return nil, fmt.Errorf("natsjs: playbook %s is not in bucket %s (lost with the server's store?): %w", cmd.PlaybookHash, w.n.bucket, err)
			}
			return nil, fmt.Errorf("natsjs: fetch playbook %s: %w", cmd.PlaybookHash, err)
		}
		src := e.Value()
		if got := engine.PlaybookHash(src); got != cmd.PlaybookHash {
			return nil, permanentError{fmt.Errorf("natsjs: playbook %s: stored source hashes to %s", cmd.PlaybookHash, got)}
		}
		pb, err := dsl.Parse(cmd.PlaybookFile, src)
		if err != nil {
			return nil, permanentError{fmt.Errorf("natsjs: playbook %s: %w", cmd.PlaybookHash, err)}
		}
		w.playbooks.Add(cmd.PlaybookHash, pb)
		return pb, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*dsl.Playbook), nil
}

func (w *Worker) onVerdict(m *nats.Msg) {
	w.vmu.Lock()
	ch := w.verdicts[m.Subject]
	delete(w.verdicts, m.Subject)
	w.vmu.Unlock()
	if ch != nil {
		ch <- string(m.Data)
	}
}

// reporter is the engine.Reporter a command runs with: reports go to the
// events stream, heartbeats to the heartbeat subject.
type reporter struct {
	w        *Worker
	claimed  atomic.Bool // frame.claimed was recorded
	finished atomic.Bool // the command's final report is in the stream
	// tooLarge is set when the frame's claim did not fit a NATS message:
	// why the frame fails.
	tooLarge atomic.Pointer[string]
	// partials is set once a call.partial went to the events stream: a
	// chained report, a request beside the stream, could then be recorded
	// before it (and the partial refused), so the slot stops chaining.
	partials atomic.Bool
}

// Report implements engine.Reporter. A report is durable once the events
// stream acknowledged it; frame.claimed also waits for the orchestrator's
// verdict, since the frame's rows must be on record before its body runs.
func (r *reporter) Report(ctx context.Context, ev eventlog.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := r.w
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("natsjs: encode report: %w", err)
	}
	if limit := w.cfg.Conn.MaxPayload() - reportOverhead; int64(len(b)) > limit &&
		(ev.Type == eventlog.TypeCommandCompleted || ev.Type == eventlog.TypeCommandFailed) {
		// The result cannot travel; the command fails saying why, rather
		// than be re-run for a result that never fits.
		w.stats.TooLarge.Add(1)
		ev.Type = eventlog.TypeCommandFailed
		ev.Payload, _ = json.Marshal(map[string]any{
			"error": fmt.Sprintf("the command's report is %d bytes, more than a NATS message may carry (max_payload %d): give the server and the workers a result store (--result-store)", len(b), w.cfg.Conn.MaxPayload()),
			"field": "result",
		})
		if b, err = json.Marshal(ev); err != nil {
			return fmt.Errorf("natsjs: encode report: %w", err)
		}
	}
	for m := w.stats.MaxReportBytes.Load(); int64(len(b)) > m && !w.stats.MaxReportBytes.CompareAndSwap(m, int64(len(b))); m = w.stats.MaxReportBytes.Load() {
	}
	msg := &nats.Msg{Subject: w.n.evt, Data: b, Header: nats.Header{}}
	msg.Header.Set(headerCommand, ev.CommandID)
	if ev.Type == eventlog.TypeFrameClaimed {
		if limit := w.cfg.Conn.MaxPayload() - reportOverhead; int64(len(b)) > limit {
			// The claim cannot travel, now or on any re-issue: the engine
			// rolls it back, and the frame fails saying why (handle)
			// instead of being re-issued for as long as its lease allows.
			w.stats.TooLarge.Add(1)
			msg := fmt.Sprintf("natsjs: step %s: the frame's claimed rows are %d bytes, more than a NATS message may carry (max_payload %d): "+
				"claim fewer rows (the frame's max_rows) or narrower ones, or raise the NATS server's max_payload", ev.Step, len(b), w.cfg.Conn.MaxPayload())
			r.tooLarge.Store(&msg)
			return errors.New(msg)
		}
		v, err := r.await(ctx, msg)
		if err != nil {
			return err
		}
		if v == verdictStale {
			return engine.ErrStale
		}
		r.claimed.Store(true)
		return nil
	}
	if ev.Type == eventlog.TypeCallPartial {
		r.partials.Store(true) // before it may be in the stream
	}
	if err := w.publish(ctx, msg); err != nil {
		return fmt.Errorf("natsjs: publish %s report: %w", ev.Type, err)
	}
	if ev.Type != eventlog.TypeCallPartial {
		r.finished.Store(true)
	}
	return nil
}

// MayChain implements engine.ChainReporter: not once the command handed
// on partial results, which travel the events stream.
func (r *reporter) MayChain() bool { return !r.partials.Load() }

// ReportChained implements engine.ChainReporter: the frame.done and the
// rows claimed ahead go to the orchestrator as one request on
// <prefix>.chain, and its answer brings the slot's next command back. The
// request bypasses the events stream: without an answer the worker gives
// the rows back and reports the frame.done alone, durably. An answer that
// the report was not recorded (the append failed, perhaps after its
// commit) has the request sent again, the rows held meanwhile: recorded
// after all, the report gets the slot's next frame back with them.
func (r *reporter) ReportChained(ctx context.Context, done eventlog.Event, claimed json.RawMessage) (*engine.Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := r.w
	msg, err := encodeChained(w.n.chain, done, claimed)
	if err != nil {
		return nil, err
	}
	if int64(len(msg.Data)) > w.cfg.Conn.MaxPayload()-reportOverhead {
		return nil, fmt.Errorf("natsjs: a chained report of %d bytes does not fit a NATS message", len(msg.Data))
	}
	deadline := time.Now().Add(w.cfg.ReportTimeout)
	var reply *nats.Msg
	for backoff := minChainResend; ; backoff = min(2*backoff, maxChainResend) {
		if reply, err = r.requestChain(ctx, msg, deadline); err != nil {
			return nil, err
		}
		if string(reply.Data) != verdictRetry {
			break
		}
		wait := min(backoff, time.Until(deadline))
		if wait <= 0 {
			return nil, errChainNotRecorded
		}
		w.stats.ChainRetries.Add(1)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	switch v := string(reply.Data); v {
	case verdictOK:
		r.finished.Store(true)
		return nil, nil
	case verdictStale:
		return nil, engine.ErrStale
	}
	// The frame.done is recorded: the command the message carried has
	// reported its end, whatever comes of the next frame.
	r.finished.Store(true)
	cmd, err := engine.DecodeCommand(reply.Data)
	if err != nil {
		// The claim is on record under a command we cannot run: it is
		// re-issued with its rows once its lease runs out.
		return nil, err
	}
	w.stats.Chained.Add(1)
	return cmd, nil
}

// chainRetry is how long a worker waits for the answer to one chained
// request before it sends the request again. The orchestrator answers a
// request it recorded before with the same command, so an answer lost
// with a leader that died is made up by the next leader.
const chainRetry = 2 * time.Second

// Bounds of the backoff between the sendings of a chained report the
// orchestrator answered it could not record.
const (
	minChainResend = 10 * time.Millisecond
	maxChainResend = time.Second
)

// requestChain sends a chained report until an orchestrator answers it,
// until deadline.
func (r *reporter) requestChain(ctx context.Context, msg *nats.Msg, deadline time.Time) (*nats.Msg, error) {
	w := r.w
	for {
		wait := min(chainRetry, time.Until(deadline))
		rctx, cancel := context.WithTimeout(ctx, wait)
		reply, err := w.cfg.Conn.RequestMsgWithContext(rctx, msg)
		cancel()
		switch {
		case err == nil:
			return reply, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case time.Until(deadline) <= 0:
			return nil, fmt.Errorf("%w: %w", ErrNoVerdict, err)
		case errors.Is(err, nats.ErrNoResponders):
			// No orchestrator serves now (a failover): wait for the next.
			select {
			case <-time.After(min(200*time.Millisecond, time.Until(deadline))):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		w.stats.ChainRetries.Add(1)
	}
}

// errChainNotRecorded: the orchestrator could not record a chained report.
var errChainNotRecorded = errors.New("natsjs: chained report not recorded")

// await publishes msg to the events stream with a reply subject and waits
// for the orchestrator's verdict.
func (r *reporter) await(ctx context.Context, msg *nats.Msg) (string, error) {
	w := r.w
	subj := w.inbox + "." + strconv.FormatInt(w.vseq.Add(1), 36)
	verdict := make(chan string, 1)
	w.vmu.Lock()
	w.verdicts[subj] = verdict
	w.vmu.Unlock()
	defer func() {
		w.vmu.Lock()
		delete(w.verdicts, subj)
		w.vmu.Unlock()
	}()
	msg.Header.Set(headerReply, subj)
	if err := w.publish(ctx, msg); err != nil {
		return "", fmt.Errorf("natsjs: publish report: %w", err)
	}
	t := time.NewTimer(w.cfg.ReportTimeout)
	defer t.Stop()
	select {
	case v := <-verdict:
		return v, nil
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
		return "", ErrNoVerdict
	}
}

// publish puts a report in the events stream; if the stream is gone (an
// operator deleted it, or the server came back without its store), it
// creates the streams again and publishes once more.
func (w *Worker) publish(ctx context.Context, msg *nats.Msg) error {
	_, err := w.js.PublishMsg(ctx, msg)
	if err == nil || !gone(err) || ctx.Err() != nil {
		return err
	}
	w.log.Warn("natsjs: the events stream is gone; creating it again", "stream", w.n.evtStream, "error", err)
	if _, eerr := ensure(ctx, w.js, w.cfg, w.n); eerr != nil {
		return errors.Join(err, eerr)
	}
	_, err = w.js.PublishMsg(ctx, msg)
	return err
}

// Heartbeat implements engine.Reporter over core NATS (at most once: a
// lost heartbeat is made up by the next).
func (r *reporter) Heartbeat(ctx context.Context, executionID, commandID string) error {
	b, _ := json.Marshal(heartbeatMsg{ExecutionID: executionID, CommandID: commandID})
	return r.w.cfg.Conn.Publish(r.w.n.hb, b)
}
