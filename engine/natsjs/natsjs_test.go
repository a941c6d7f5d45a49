package natsjs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/tools"
)

const header = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\n"

// bundle is an orchestrator (engine + dispatcher) on a fresh prefix.
type bundle struct {
	cfg   natsjs.Config
	eng   *engine.Engine
	disp  *natsjs.Dispatcher
	log   eventlog.Log
	calls *calls
	// results is the engine's result store, which workers get too; tools
	// adds tools to the workers' registries.
	results *resultstore.Store
	tools   func(*tools.Registry)
}

// calls records tool calls by key, per command id.
type calls struct {
	mu   sync.Mutex
	keys map[string]int
	cmds map[string]map[string]int // key → command id → count
	pool map[string]string         // key → worker id
	// block, if set, makes a call with that key wait for ctx the first
	// time.
	block   string
	blocked chan struct{}
	// hang, if set, is what the blocked call waits for instead of ctx: a
	// worker that died mid-call, from which nothing more comes.
	hang chan struct{}
	// stopped, if set, receives the cause of the blocked call's context
	// once it ends.
	stopped chan error
}

func newCalls() *calls {
	return &calls{keys: map[string]int{}, cmds: map[string]map[string]int{}, pool: map[string]string{}, blocked: make(chan struct{}, 1)}
}

// worker returns the id of the worker that last ran the call with key.
func (c *calls) worker(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pool[key]
}

func (c *calls) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keys[key]
}

// tool returns a host tool for worker id.
func (c *calls) tool(id string) tools.Tool {
	return tools.ToolFunc(func(ctx context.Context, call *tools.Call) (tools.Output, error) {
		key := fmt.Sprint(call.Config["key"])
		c.mu.Lock()
		c.keys[key]++
		n := c.keys[key]
		if c.cmds[key] == nil {
			c.cmds[key] = map[string]int{}
		}
		c.cmds[key][call.CommandID]++
		c.pool[key] = id
		c.mu.Unlock()
		if key == c.block && n == 1 {
			c.blocked <- struct{}{}
			if c.hang != nil {
				<-c.hang
				return tools.Output{Status: tools.StatusError, Error: "the worker died"}, nil
			}
			<-ctx.Done()
			if c.stopped != nil {
				c.stopped <- context.Cause(ctx)
			}
			return tools.Output{Status: tools.StatusError, Error: ctx.Err().Error()}, nil
		}
		return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"key": key, "worker": id, "value": call.Config["value"]}}, nil
	})
}

func setup(t *testing.T, lease, ackWait time.Duration) *bundle {
	t.Helper()
	return setupWith(t, lease, ackWait, nil)
}

// setupWith is setup with the engine's configuration adjusted by adjust.
func setupWith(t *testing.T, lease, ackWait time.Duration, adjust func(*engine.Config)) *bundle {
	t.Helper()
	return setupOn(t, testenv.NATS(t), lease, ackWait, adjust)
}

// setupOn is setupWith on the NATS server at url; the connection
// reconnects for ever.
func setupOn(t *testing.T, url string, lease, ackWait time.Duration, adjust func(*engine.Config)) *bundle {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cfg := natsjs.Config{Conn: nc, Prefix: fmt.Sprintf("t%08x", rand.Uint32()), AckWait: ackWait}
	t.Cleanup(func() { _ = natsjs.Delete(context.Background(), cfg) })
	ctx := context.Background()
	d, err := natsjs.NewDispatcher(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := eventlog.NewMemory()
	ecfg := engine.Config{Log: log, Workers: 0, Dispatcher: d, CommandLease: lease, Tick: 10 * time.Millisecond}
	if adjust != nil {
		adjust(&ecfg)
	}
	e, err := engine.New(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- d.Serve(sctx, e.Reporter()) }()
	t.Cleanup(func() {
		_ = e.Close()
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		_ = d.Close()
	})
	return &bundle{cfg: cfg, eng: e, disp: d, log: log, calls: newCalls(), results: ecfg.Results}
}

// worker starts a worker of pool; stop cancels it and waits for Run.
func (b *bundle) worker(t *testing.T, id, pool string, grace time.Duration) (w *natsjs.Worker, stop func()) {
	t.Helper()
	return b.startWorker(t, id, natsjs.WorkerOptions{Pool: pool, Concurrency: 4, Grace: grace})
}

// startWorker starts a worker with opts (its Worker is made here unless
// opts has one).
func (b *bundle) startWorker(t *testing.T, id string, opts natsjs.WorkerOptions) (w *natsjs.Worker, stop func()) {
	t.Helper()
	if opts.Worker == nil {
		treg := tools.NewRegistry()
		treg.MustRegister("rec", b.calls.tool(id))
		if b.tools != nil {
			b.tools(treg)
		}
		opts.Worker = &engine.Worker{ID: id, Tools: treg, Results: b.results}
	}
	w, err := natsjs.NewWorker(context.Background(), b.cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return w, stop
}

// startBlocked starts src (header added) and returns its execution id
// once the call that b.calls.block names runs.
func (b *bundle) startBlocked(ctx context.Context, t *testing.T, src string) string {
	t.Helper()
	id, err := b.eng.Start(ctx, []byte(header+src), engine.StartOptions{File: "t.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.calls.blocked:
	case <-ctx.Done():
		t.Fatal("the blocking call never ran")
	}
	return id
}

func (b *bundle) run(t *testing.T, src string) (*engine.Summary, []eventlog.Event) {
	t.Helper()
	sum, evs := b.runToEnd(t, src)
	if sum.Status != engine.StatusCompleted {
		for _, ev := range evs {
			t.Logf("%d %s %s %s %s", ev.Seq, ev.Type, ev.Step, ev.CommandID, ev.Payload)
		}
		t.Fatalf("status %s: %s %s %s", sum.Status, sum.Step, sum.Field, sum.Error)
	}
	return sum, evs
}

// runToEnd runs src until it ends, however it ends.
func (b *bundle) runToEnd(t *testing.T, src string) (*engine.Summary, []eventlog.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(header+src), engine.StartOptions{File: "t.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := b.eng.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	evs, err := b.log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return sum, evs
}

func TestStepsLoopsAndPools(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second, 5*time.Second)
	b.worker(t, "w-default-1", "", time.Second)
	b.worker(t, "w-default-2", "default", time.Second)
	b.worker(t, "w-gpu", "gpu", time.Second)
	sum, _ := b.run(t, `
workload: {numbers: [1, 2, 3, 4, 5, 6]}
workflow:
  - step: start
    tool: {kind: rec, key: start, value: 7}
    next: [square]
  - step: square
    loop:
      in: '{{ workload.numbers }}'
      iterator: n
      spec: {mode: parallel, max_in_flight: 3}
    tool: {kind: rec, key: 'sq{{ n }}', value: '{{ n * n }}'}
    next: [gpu]
  - step: gpu
    spec: {pool: gpu}
    tool: {kind: rec, key: gpu, value: '{{ start.value }}'}
`)
	if sum.Steps["gpu"] != "completed" {
		t.Fatalf("steps %v", sum.Steps)
	}
	for i := 1; i <= 6; i++ {
		if n := b.calls.count(fmt.Sprintf("sq%d", i)); n != 1 {
			t.Errorf("item %d ran %d times", i, n)
		}
	}
	b.calls.mu.Lock()
	defer b.calls.mu.Unlock()
	if got := b.calls.pool["gpu"]; got != "w-gpu" {
		t.Errorf("gpu step ran on %q, want the gpu pool's worker", got)
	}
	if got := b.calls.pool["start"]; got == "w-gpu" {
		t.Errorf("start step ran on the gpu pool")
	}
	// Whole numbers survive the wire as integers: 7, not 7.0.
	res := sum.Results["gpu"].(map[string]any)["data"].(map[string]any)
	if v := fmt.Sprint(res["value"]); v != "7" {
		t.Errorf("value %q crossed the wire, want 7", v)
	}
	// The counter moves after the engine recorded the report.
	deadline := time.Now().Add(5 * time.Second)
	for b.disp.Stats().Reports.Load() < 8 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.disp.Stats().Reports.Load(); n != 8 {
		t.Errorf("reports %d, want 8 (one per command)", n)
	}
}

// A worker that fetched a command and vanished: the engine re-issues the
// command after its lease; JetStream redelivers the old attempt's message
// after AckWait, and the worker drops it instead of running it twice.
func TestRedeliveredStaleAttemptIsDropped(t *testing.T) {
	t.Parallel()
	// The lease runs out well before AckWait, so attempt 1 is superseded
	// when JetStream delivers it again.
	b := setup(t, time.Second, 3*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The zombie: the pool's consumer, fetched from and never acknowledged.
	js, err := jetstream.New(b.cfg.Conn)
	if err != nil {
		t.Fatal(err)
	}
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    spec: {pool: zombie}
    tool: {kind: rec, key: once}
`), engine.StartOptions{File: "t.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, fmt.Sprintf("%s_COMMANDS", upper(b.cfg.Prefix)), jetstream.ConsumerConfig{
		Durable: "pool-zombie", FilterSubject: b.cfg.Prefix + ".cmd.zombie", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second, MaxAckPending: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var first jetstream.Msg
	for m := range batch.Messages() {
		first = m
	}
	if first == nil {
		t.Fatalf("zombie fetched nothing: %v", batch.Error())
	}
	cmd, err := engine.DecodeCommand(first.Data())
	if err != nil || cmd.ID == "" {
		t.Fatalf("decode: %v", err)
	}
	// Now a real worker joins the pool; it gets attempt 2 (re-issued after
	// the lease) and, after AckWait, the zombie's attempt 1 again.
	zw, _ := b.worker(t, "w-zombie-pool", "zombie", time.Second)
	sum, err := b.eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("wait: %v %+v", err, sum)
	}
	deadline := time.Now().Add(10 * time.Second)
	// Dropped is counted after the dispatcher answers the worker's check,
	// a round trip after Redelivered, so wait for it rather than for
	// Redelivered. A worker slow to start (a loaded machine) may find
	// attempt 2's message aged: checked, it is dropped if the attempt
	// expired meanwhile, and run if it is still the current one; the
	// step runs once either way (checked below).
	settled := func() bool {
		st := zw.Stats()
		return st.Redelivered.Load() == 1 && st.Dropped.Load() >= 1 && st.Dropped.Load() <= st.Redelivered.Load()+st.Aged.Load()
	}
	for !settled() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling the counters with a deadline
	}
	if !settled() {
		st := zw.Stats()
		t.Fatalf("redelivered %d, aged %d, dropped %d; want the redelivered message dropped, and any aged one",
			st.Redelivered.Load(), st.Aged.Load(), st.Dropped.Load())
	}
	if n := b.calls.count("once"); n != 1 {
		t.Fatalf("the step ran %d times, want once", n)
	}
	b.calls.mu.Lock()
	for c := range b.calls.cmds["once"] {
		if c == cmd.Base+"@1" || c == cmd.ID {
			t.Errorf("the zombie's attempt %s ran", c)
		}
	}
	b.calls.mu.Unlock()
}

// A stopping worker hands a command it could not finish within the grace
// period back at once; another worker runs the same attempt.
func TestGracefulStopHandsCommandsBack(t *testing.T) {
	t.Parallel()
	b := setup(t, 10*time.Second, 10*time.Second)
	b.calls.block = "slow"
	_, stop1 := b.worker(t, "w-1", "", 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := b.startBlocked(ctx, t, `
workflow:
  - step: start
    tool: {kind: rec, key: slow}
`)
	started := time.Now()
	stop1()
	b.worker(t, "w-2", "", time.Second)
	sum, err := b.eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("wait: %v %+v", err, sum)
	}
	// Not handed back, the same attempt would come again only after the
	// stream's AckWait (10 s), a new one after the lease (10 s): the bound
	// sits below both, with room for a loaded machine.
	if took := time.Since(started); took > 8*time.Second {
		t.Errorf("took %s: the command waited for its lease or AckWait instead of being handed back", took)
	}
	b.calls.mu.Lock()
	defer b.calls.mu.Unlock()
	if len(b.calls.cmds["slow"]) != 1 || b.calls.keys["slow"] != 2 {
		t.Fatalf("calls %v: want the same attempt run twice", b.calls.cmds["slow"])
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := natsjs.NewDispatcher(ctx, natsjs.Config{}); err == nil {
		t.Fatal("want an error without Conn")
	}
	nc := &nats.Conn{}
	if _, err := natsjs.NewDispatcher(ctx, natsjs.Config{Conn: nc, Prefix: "a.b"}); err == nil {
		t.Fatal("want an error for a prefix with a dot")
	}
	if _, err := natsjs.NewWorker(ctx, natsjs.Config{Conn: nc}, natsjs.WorkerOptions{}); err == nil {
		t.Fatal("want an error without Worker")
	}
	if _, err := natsjs.NewWorker(ctx, natsjs.Config{Conn: nc}, natsjs.WorkerOptions{Worker: &engine.Worker{}, Pool: "a b"}); err == nil {
		t.Fatal("want an error for a bad pool name")
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

// TestCancelReachesRemoteWorkers cancels an execution whose command runs
// on a worker process elsewhere: the worker hears the cancel on the
// transport's cancel subject, interrupts the command and reports it
// failed, and the execution ends cancelled long before the command's
// lease would have run out.
func TestCancelReachesRemoteWorkers(t *testing.T) {
	b := setup(t, time.Minute, 30*time.Second)
	b.calls.block = "long"
	b.worker(t, "w1", "", time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := b.startBlocked(ctx, t, `
workflow:
  - step: start
    tool: {kind: rec, key: long}
`)
	if err := b.eng.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	sum, err := b.eng.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCancelled {
		t.Fatalf("status %s, want cancelled", sum.Status)
	}
	evs, err := b.log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandFailed {
			if ev.WorkerID != "w1" || !strings.Contains(string(ev.Payload), "execution cancelled") {
				t.Fatalf("the command ended with %s from %q, want the worker's own cancelled report", ev.Payload, ev.WorkerID)
			}
			return
		}
	}
	t.Fatal("the cancelled command reported nothing")
}
