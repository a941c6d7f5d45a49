package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// TestStreamsDeletedWhileRunning: an operator deletes the streams and the
// playbook bucket (as `nats stream rm` does; a server restarted on an
// empty store has none either) while a worker runs a command. The
// worker's report, the next step's command and its playbook source need
// them: both sides make them again, and the execution completes, where
// every publish used to fail and the worker fetch from a consumer that was
// gone, for ever.
func TestStreamsDeletedWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, 3*time.Second, 3*time.Second)
	b.calls.block = "first"
	b.calls.hang = make(chan struct{})
	b.worker(t, "w1", "", time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := b.startBlocked(ctx, t, "workflow:\n  - step: start\n    tool: {kind: rec, key: first}\n    next: [second]\n"+
		"  - step: second\n    tool: {kind: rec, key: second}\n")
	js, err := jetstream.New(b.cfg.Conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{upper(b.cfg.Prefix) + "_COMMANDS", upper(b.cfg.Prefix) + "_EVENTS", "KV_" + upper(b.cfg.Prefix) + "_PLAYBOOKS"} {
		if err := js.DeleteStream(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	close(b.calls.hang)
	start := time.Now()
	sum, err := b.eng.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	t.Logf("ended %s after the streams were deleted", time.Since(start))
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s %s", sum.Status, sum.Step, sum.Error)
	}
	if n := b.calls.count("second"); n != 1 {
		t.Errorf("second ran %d times, want once", n)
	}
}

// TestConsumerDeletedWhileRunning: an operator deletes the pool's
// consumer and the orchestrator's; both are recreated.
func TestConsumersDeletedWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, 3*time.Second, 3*time.Second)
	b.worker(t, "w1", "", time.Second)
	b.run(t, "workflow:\n  - step: start\n    tool: {kind: rec, key: before}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(b.cfg.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctx, upper(b.cfg.Prefix)+"_COMMANDS", "pool-default"); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctx, upper(b.cfg.Prefix)+"_EVENTS", "orchestrator"); err != nil {
		t.Fatal(err)
	}
	b.run(t, "workflow:\n  - step: start\n    tool: {kind: rec, key: after}\n")
	if n := b.calls.count("after"); n != 1 {
		t.Errorf("ran %d times, want once", n)
	}
}

// natsServer is a nats-server process of the test's own, which it may
// kill and start again.
type natsServer struct {
	t     *testing.T
	bin   string
	port  int
	store string
	cmd   *exec.Cmd
}

// startNATS starts nats-server with JetStream on a free port, storing in
// a temporary directory; the test is skipped without the binary (fails
// under CI=true).
func startNATS(t *testing.T) *natsServer {
	t.Helper()
	bin := testenv.Binary(t, "nats-server")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &natsServer{t: t, bin: bin, port: port, store: t.TempDir()}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

func (s *natsServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "-js", "-a", "127.0.0.1", "-p", fmt.Sprint(s.port), "-sd", s.store)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := nats.Connect(s.url(), nats.NoReconnect())
		if err == nil {
			js, jerr := jetstream.New(nc)
			if jerr == nil {
				_, jerr = js.AccountInfo(context.Background())
			}
			nc.Close()
			if jerr == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("nats-server did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling a starting process
	}
}

// kill kills the server at once (SIGKILL) and waits for it to exit.
func (s *natsServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// TestBrokerRestartMidLoop: the NATS server is killed (-9) while a loop
// runs (an item loop, and a cursor loop draining a queue), and started
// again on the same store, or on an empty one (streams, consumers and the
// playbook bucket gone). The orchestrator and the worker reconnect, make
// what they need again, and the execution completes: every item or row
// run at least once, no row left claimed, loop.done once. On an empty
// store they used to wait for streams and consumers that nobody made
// again, for ever.
func TestBrokerRestartMidLoop(t *testing.T) {
	for _, loop := range []string{"items", "cursor"} {
		for _, fresh := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fresh=%v", loop, fresh), func(t *testing.T) {
				testBrokerRestart(t, loop == "cursor", fresh)
			})
		}
	}
}

func testBrokerRestart(t *testing.T, cursorLoop, fresh bool) {
	srv := startNATS(t)
	b := setupOn(t, srv.url(), 3*time.Second, 3*time.Second, nil)
	var calls atomic.Int64
	ran := map[string]int{}
	var mu sync.Mutex
	halfway := make(chan struct{})
	restarted := make(chan struct{})
	gate := func(r *tools.Registry) {
		r.MustRegister("gate", tools.ToolFunc(func(ctx context.Context, call *tools.Call) (tools.Output, error) {
			mu.Lock()
			ran[fmt.Sprint(call.Config["n"])]++
			mu.Unlock()
			if calls.Add(1) == 15 {
				close(halfway)
				select {
				case <-restarted:
				case <-ctx.Done():
				}
			}
			return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"n": call.Config["n"]}}, nil
		}))
	}
	const n = 60
	var src string
	var q *jobQueue
	if cursorLoop {
		q = newJobDB(t, n)
		b.startWorker(t, "w1", natsjs.WorkerOptions{Worker: q.worker(b, "w1", gate), Concurrency: 2, Grace: time.Second})
		src = q.playbook(2, 5, "{kind: gate, n: '{{ iter.job.id }}'}")
	} else {
		b.tools = gate
		b.worker(t, "w1", "", time.Second)
		var items []string
		for i := 1; i <= n; i++ {
			items = append(items, fmt.Sprint(i))
		}
		src = `
workload: {items: [` + strings.Join(items, ", ") + `]}
workflow:
  - step: start
    loop:
      in: '{{ workload.items }}'
      iterator: n
      spec: {mode: parallel, max_in_flight: 2}
    tool: {kind: gate, n: '{{ n }}'}
`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(header+src), engine.StartOptions{File: "t.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-halfway:
	case <-ctx.Done():
		t.Fatal("the loop never got halfway")
	}
	srv.kill()
	if fresh {
		if err := os.RemoveAll(srv.store); err != nil {
			t.Fatal(err)
		}
	}
	srv.start()
	close(restarted)
	began := time.Now()
	sum, err := b.eng.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	t.Logf("ended %s after the restart; %d calls for %d rows", time.Since(began), calls.Load(), n)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s %s", sum.Status, sum.Step, sum.Error)
	}
	mu.Lock()
	for i := 1; i <= n; i++ {
		if ran[fmt.Sprint(i)] == 0 {
			t.Errorf("%d never ran", i)
		}
	}
	mu.Unlock()
	evs, err := b.log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c := logtest.CountType(evs, eventlog.TypeLoopDone); c != 1 {
		t.Errorf("loop.done %d times", c)
	}
	if q != nil {
		var left int
		if err := q.db.QueryRow(`SELECT count(*) FROM jobs WHERE status <> 'done'`).Scan(&left); err != nil || left != 0 {
			t.Errorf("%d rows not done (%v)", left, err)
		}
	}
}

// TestWorkerCutOffLongerThanLease: a worker's connection goes silent (a
// NAT that forgot it) while it runs a command, for longer than the
// command's lease; the engine re-issues the command to another worker.
// When the connection comes back, the cut-off worker's late report is
// refused, and the step ends once. The worker here does not stop its
// command when cut off (MissedHeartbeats -1), and its tool ignores its
// context: the engine's fencing alone (TestCutOffWorkerStopsItsCommand
// is the worker's own).
func TestWorkerCutOffLongerThanLease(t *testing.T) {
	b := setup(t, 2*time.Second, 2*time.Second)
	b.calls.hang = make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	proxy, _, id := b.blockBehindProxy(ctx, t, natsjs.WorkerOptions{MissedHeartbeats: -1}, "slow", slowThenAfter)
	proxy.Hole()
	b.worker(t, "w2", "", time.Second)
	sum, err := b.eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("wait: %v %+v", err, sum)
	}
	// The cut-off call ends now, and its report goes out once the
	// connection is back.
	close(b.calls.hang)
	proxy.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for b.disp.Stats().Stale.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling a counter with a deadline
	}
	if b.disp.Stats().Stale.Load() == 0 {
		t.Error("the cut-off worker's late report was not refused as stale")
	}
	evs, err := b.log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ended := 0
	for _, ev := range evs {
		if ev.Step == "start" && (ev.Type == eventlog.TypeStepCompleted || ev.Type == eventlog.TypeStepFailed) {
			ended++
		}
	}
	if ended != 1 {
		t.Errorf("step start ended %d times", ended)
	}
	if n := b.calls.count("after"); n != 1 {
		t.Errorf("after ran %d times", n)
	}
}

// TestCutOffWorkerStopsItsCommand: a worker's connection goes silent (a
// NAT that forgot it: the client notices nothing for minutes) while it
// runs a command. The worker stops the command on its own, before the
// engine re-issues it to another worker, instead of running on beside
// that attempt: the call's context ends with ErrCutOff while the
// connection is still silent. The step ends once, with the other
// worker's call.
func TestCutOffWorkerStopsItsCommand(t *testing.T) {
	const lease = 2 * time.Second
	// AckWait well past the lease: the engine's re-issue, not a
	// redelivery, brings the command to the other worker.
	b := setup(t, lease, 3*lease)
	b.calls.stopped = make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	proxy, cw, id := b.blockBehindProxy(ctx, t, natsjs.WorkerOptions{}, "slow", slowThenAfter)
	proxy.Hole()
	select {
	case cause := <-b.calls.stopped:
		if !errors.Is(cause, natsjs.ErrCutOff) {
			t.Errorf("the cut-off call ended with %v, want ErrCutOff", cause)
		}
	case <-time.After(4 * lease):
		t.Fatal("the cut-off worker ran on: its call was not stopped")
	}
	if n := cw.Stats().CutOff.Load(); n != 1 {
		t.Errorf("CutOff = %d, want 1", n)
	}
	b.worker(t, "w2", "", time.Second)
	sum, err := b.eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("wait: %v %+v", err, sum)
	}
	proxy.Resume()
	if w := b.calls.worker("slow"); w != "w2" {
		t.Errorf("slow last ran on %q, want w2", w)
	}
	if n := b.calls.count("slow"); n != 2 {
		t.Errorf("slow ran %d times, want 2 (cut off, then on w2)", n)
	}
	if n := b.calls.count("after"); n != 1 {
		t.Errorf("after ran %d times", n)
	}
}

// slowThenAfter is a playbook whose step start calls rec with key slow,
// then step after with key after.
const slowThenAfter = "workflow:\n  - step: start\n    tool: {kind: rec, key: slow}\n    next: [after]\n" +
	"  - step: after\n    tool: {kind: rec, key: after}\n"

// blockBehindProxy starts a worker "cut" of opts (its Worker made here
// unless opts has one), one command at a time, on its own connection
// through a proxy, then an execution of src, whose call with key block
// blocks (b.calls.block). It returns once that call runs on the worker
// and the worker's first heartbeat reached the dispatcher.
func (b *bundle) blockBehindProxy(ctx context.Context, t *testing.T, opts natsjs.WorkerOptions, block, src string) (*testenv.Proxy, *natsjs.Worker, string) {
	t.Helper()
	proxy, purl := testenv.NewURLProxy(t, testenv.NATS(t))
	nc, err := nats.Connect(purl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b.calls.block = block
	cfg := b.cfg
	cfg.Conn = nc
	if opts.Worker == nil {
		treg := tools.NewRegistry()
		treg.MustRegister("rec", b.calls.tool("cut"))
		opts.Worker = &engine.Worker{ID: "cut", Tools: treg}
	}
	opts.Concurrency, opts.Grace = 1, time.Second
	w, err := natsjs.NewWorker(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wstop := context.WithCancel(context.Background())
	wdone := make(chan struct{})
	go func() { defer close(wdone); _ = w.Run(wctx) }()
	t.Cleanup(func() { wstop(); <-wdone })
	id := b.startBlocked(ctx, t, src)
	// The engine knows the worker took the command (its first heartbeat
	// came before the proxy cuts it off), so it re-issues the command
	// after missed heartbeats rather than a whole lease: the deadline the
	// worker stops before.
	for b.disp.Stats().Heartbeats.Load() == 0 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond) // polling a counter with a deadline
	}
	return proxy, w, id
}

// TestCutOffWorkerStopsItsFrame is TestCutOffWorkerStopsItsCommand for a
// cursor loop's frame: the worker cut off in the middle of its frame's
// first row stops the row, and does not start the frame's other rows;
// the frame re-issued with its recorded rows runs them on the other
// worker, and the queue drains with every other row run once.
func TestCutOffWorkerStopsItsFrame(t *testing.T) {
	const n, maxRows = 6, 3
	b := setup(t, time.Minute, time.Minute)
	b.calls.stopped = make(chan error, 1)
	q := newJobDB(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	proxy, cw, id := b.blockBehindProxy(ctx, t, natsjs.WorkerOptions{Worker: q.worker(b, "cut", nil)},
		"job1", q.playbookFrame(1, fmt.Sprintf("{max_rows: %d, row_concurrency: 1, lease_seconds: 2}", maxRows),
			"{kind: rec, key: 'job{{ iter.job.id }}'}"))
	proxy.Hole()
	select {
	case cause := <-b.calls.stopped:
		if !errors.Is(cause, natsjs.ErrCutOff) {
			t.Errorf("the cut-off row ended with %v, want ErrCutOff", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cut-off worker ran on: its row was not stopped")
	}
	b.startWorker(t, "w2", natsjs.WorkerOptions{Worker: q.worker(b, "w2", nil), Concurrency: 1})
	sum, err := b.eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("wait: %v %+v", err, sum)
	}
	proxy.Resume()
	if n := cw.Stats().CutOff.Load(); n != 1 {
		t.Errorf("CutOff = %d, want 1", n)
	}
	if c := b.calls.count("job1"); c != 2 {
		t.Errorf("job1 ran %d times, want 2 (cut off, then on w2)", c)
	}
	for i := 2; i <= n; i++ {
		if c := b.calls.count(fmt.Sprintf("job%d", i)); c != 1 {
			t.Errorf("job%d ran %d times, want once", i, c)
		}
	}
	var left int
	if err := q.db.QueryRow(`SELECT count(*) FROM jobs WHERE status <> 'done'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d rows not done (%v)", left, err)
	}
}
