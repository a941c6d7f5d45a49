package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/faultlog"
)

// twoSteps is the smallest flow with a report and a successor.
const twoSteps = header + `
workflow:
  - step: start
    tool: {kind: rec, key: start}
    next: [second]
  - step: second
    tool: {kind: rec, key: second}
`

// TestReportAppendFailureIsRetried: the append that carries a worker's
// command.completed fails once; the in-process worker sends the report
// again and the execution completes (before: the report was dropped and
// the command, reloaded without a lease, stayed in flight forever).
func TestReportAppendFailureIsRetried(t *testing.T) {
	t.Parallel()
	fl := faultlog.New(eventlog.NewMemory())
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, Match: faultlog.HasType(eventlog.TypeCommandCompleted)})
	b := setup(t, fl)
	sum, evs := b.run(t, twoSteps, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || fl.Hits(faultlog.OpAppend) != 1 {
		t.Fatalf("status %s after %d injected failures: %s", sum.Status, fl.Hits(faultlog.OpAppend), sum.Error)
	}
	if b.rec.count("start") != 1 || b.rec.count("second") != 1 {
		t.Fatalf("start ran %d, second %d times", b.rec.count("start"), b.rec.count("second"))
	}
}

// onceDispatcher runs each command once and reports once, with no retry:
// a remote worker whose report was lost.
type onceDispatcher struct {
	eng  func() *engine.Engine
	mu   sync.Mutex
	seen []string
}

func (d *onceDispatcher) Dispatch(cmd *engine.Command) {
	d.mu.Lock()
	d.seen = append(d.seen, cmd.ID)
	d.mu.Unlock()
	go func() { _ = d.eng().Worker().Execute(context.Background(), cmd, d.eng().Reporter()) }()
}
func (d *onceDispatcher) Durable() bool { return true }
func (d *onceDispatcher) Cancel(string) {}

func (d *onceDispatcher) dispatched() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.seen...)
}

// TestLeaseSurvivesAFailedAppend: a report whose append failed, from a
// worker that does not send it again, leaves the command leased: when the
// lease runs out on the (fake) clock, the command is issued again and the
// execution completes. Before, the lease was dropped before the append
// and the command was never re-issued.
func TestLeaseSurvivesAFailedAppend(t *testing.T) {
	t.Parallel()
	fl := faultlog.New(eventlog.NewMemory())
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, Match: faultlog.HasType(eventlog.TypeCommandCompleted)})
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var eng *engine.Engine
	d := &onceDispatcher{eng: func() *engine.Engine { return eng }}
	eng = setupWith(t, engine.Config{Log: fl, Workers: 0, Dispatcher: d, Clock: clk, CommandLease: time.Minute, Tick: time.Second}).eng
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := eng.Start(ctx, []byte(twoSteps), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the one report has been refused by the failing log.
	for fl.Hits(faultlog.OpAppend) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the report never reached the log")
		case <-time.After(time.Millisecond):
		}
	}
	// Time passes; nobody reports: the lease must run out and re-issue.
	done := make(chan *engine.Summary, 1)
	go func() { s, _ := eng.Wait(ctx, id); done <- s }()
	var sum *engine.Summary
	for sum == nil {
		clk.Advance(10 * time.Second)
		select {
		case sum = <-done:
		case <-ctx.Done():
			t.Fatalf("not re-issued: dispatched %v", d.dispatched())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if got := d.dispatched(); len(got) != 3 || got[0] != "start#1@1" || got[1] != "start#1@2" {
		t.Fatalf("dispatched %v, want start#1@1, its re-issue start#1@2, then second", got)
	}
}

// TestFailedReloadKeepsNoUnsavedDecision: the append that issues the
// second step fails, and so do the reads that would reload the execution;
// once the log answers again the execution is reloaded and completes.
// Before, the failed reload kept the unsaved command.issued in memory: in
// flight, never dispatched, the execution stuck.
func TestFailedReloadKeepsNoUnsavedDecision(t *testing.T) {
	t.Parallel()
	fl := faultlog.New(eventlog.NewMemory())
	issuesSecond := func(c faultlog.Call) bool {
		for _, ev := range c.Events {
			if ev.Type == eventlog.TypeCommandIssued && ev.Step == "second" {
				return true
			}
		}
		return false
	}
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, Match: issuesSecond})
	fl.Inject(faultlog.Fault{Op: faultlog.OpRead, Times: 3})
	b := setup(t, fl)
	sum, evs := b.run(t, twoSteps, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || b.rec.count("second") != 1 {
		t.Fatalf("status %s, second ran %d times: %s", sum.Status, b.rec.count("second"), sum.Error)
	}
	if fl.Hits(faultlog.OpRead) < 3 {
		t.Fatalf("only %d reads failed: the reload path was not exercised", fl.Hits(faultlog.OpRead))
	}
}

// TestStoredIssueReportedFailedIsDispatchedOnReload: the append that
// issues the second step stores it but answers with an error, every time
// it is tried (a connection dropped before the reply). The execution is
// reloaded from the log, finds the command in flight and sends it to its
// worker at once, as the append would have: the step runs once, as its
// first attempt, with no lease to wait out. Before, the stored command
// waited for its lease to expire, each expiry counted against the step as
// if a worker had lost it, and three such appends failed the step with
// "lease expired 3 times" although no worker ever saw it. The command
// still goes out when the reloads themselves fail first.
func TestStoredIssueReportedFailedIsDispatchedOnReload(t *testing.T) {
	t.Parallel()
	// In process, and through a durable dispatcher whose worker runs what
	// it is sent once (the lease does not time out in a NATS consumer);
	// failedReloads reads of the reload fail before one succeeds.
	for _, tc := range []struct {
		name          string
		durable       bool
		failedReloads int
	}{{"inproc", false, 0}, {"durable", true, 0}, {"inproc, reloads fail", false, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var issued sync.Once
			appendFailed := make(chan struct{})
			issuesSecond := func(c faultlog.Call) bool {
				for _, ev := range c.Events {
					if ev.Type == eventlog.TypeCommandIssued && ev.Step == "second" {
						issued.Do(func() { close(appendFailed) })
						return true
					}
				}
				return false
			}
			afterAppendFailed := func(faultlog.Call) bool {
				select {
				case <-appendFailed:
					return true
				default:
					return false
				}
			}
			fl := faultlog.New(eventlog.NewMemory())
			fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Match: issuesSecond, AfterCommit: true})
			if tc.failedReloads > 0 {
				fl.Inject(faultlog.Fault{Op: faultlog.OpRead, Match: afterAppendFailed, Times: tc.failedReloads})
			}
			// The lease outlasts the run: only the reload can get the
			// command to its worker.
			cfg := engine.Config{Log: fl, CommandLease: time.Hour}
			var d *onceDispatcher
			var eng *engine.Engine
			if tc.durable {
				d = &onceDispatcher{eng: func() *engine.Engine { return eng }}
				cfg.Dispatcher = d
			}
			b := setupWith(t, cfg)
			eng = b.eng
			sum, evs := runPlaybook(t, b.eng, fl, twoSteps, engine.StartOptions{}, 20*time.Second)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCompleted || b.rec.count("second") != 1 {
				t.Fatalf("status %s, second ran %d times: %s", sum.Status, b.rec.count("second"), sum.Error)
			}
			var ids []string
			for _, ev := range evs {
				if ev.Type == eventlog.TypeCommandIssued && ev.Step == "second" {
					ids = append(ids, ev.CommandID)
				}
			}
			if len(ids) != 1 || fl.Hits(faultlog.OpAppend) != 1 {
				t.Fatalf("second issued as %v after %d failed appends; want its first attempt only, one failed append", ids, fl.Hits(faultlog.OpAppend))
			}
			if got := fl.Hits(faultlog.OpRead); got != tc.failedReloads {
				t.Fatalf("%d reloads failed, want %d", got, tc.failedReloads)
			}
			if d != nil && !reflect.DeepEqual(d.dispatched(), []string{"start#1@1", ids[0]}) {
				t.Fatalf("dispatched %v, want start#1@1 and %s, once each", d.dispatched(), ids[0])
			}
		})
	}
}

// TestExecutionsUnderLogFaults runs the engine's replay playbooks, a
// parallel loop and a retry policy through a log that fails appends
// (before and after they are stored), fails reads and is slow, and checks
// each ends exactly as it does on a healthy log.
func TestExecutionsUnderLogFaults(t *testing.T) {
	t.Parallel()
	flows := map[string]string{
		"parallel": header + `
workflow:
  - step: start
    loop:
      in: '{{ range(12) | list }}'
      iterator: i
      spec: {mode: parallel, max_in_flight: 4}
    tool: {kind: rec, key: 'p{{ iter.i }}', v: '{{ iter.i * 2 }}'}
    next: [end]
  - step: end
    tool: {kind: rec, key: end, n: '{{ start | length }}'}
`,
		"retry": header + `
workflow:
  - step: start
    tool: {kind: rec, key: flaky, fail: 2}
    spec:
      policy:
        rules:
          - when: '{{ output.status == "error" }}'
            then: {do: retry, attempts: 5, delay: 0}
`,
	}
	for _, name := range []string{"branches", "sequential"} {
		src, err := os.ReadFile(filepath.Join("testdata", "replay", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		flows[name] = string(src)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("fault seed %d", seed)
	for name, src := range flows {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clean := setup(t, nil)
			want, _ := clean.run(t, src, nil)
			if want.Status != engine.StatusCompleted {
				t.Fatalf("clean run: %s %s", want.Status, want.Error)
			}
			fl := faultlog.New(eventlog.NewMemory(), seed)
			boom := errors.New("connection reset by peer")
			fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Rate: 0.25, Err: boom})
			fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Rate: 0.15, AfterCommit: true, Err: boom})
			fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Rate: 0.3, Delay: 2 * time.Millisecond})
			fl.Inject(faultlog.Fault{Op: faultlog.OpRead, Rate: 0.3})
			// A short command lease, so that a command left without a
			// worker is re-issued within the test (a command whose issue
			// was stored but reported failed no longer waits for it: the
			// reload dispatches it). Not shorter: after a heartbeat the deadline is three beats
			// (lease/10 each) away, and a race-enabled run on a loaded
			// two-core machine can miss 90 ms of beats (lease 300 ms
			// failed "work" with "lease expired 3 times" at load 19).
			e := setupWith(t, engine.Config{Log: fl, CommandLease: 2 * time.Second}).eng
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var id string
			var err error
			for {
				// Start itself may meet a failing append: the caller is
				// told and starts again.
				id, err = e.Start(ctx, []byte(src), engine.StartOptions{File: "faults.yaml"})
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatal(err)
				}
			}
			got, err := e.Wait(ctx, id)
			if err != nil {
				t.Fatalf("wait: %v (appends failed %d of %d, reads %d)", err, fl.Hits(faultlog.OpAppend), fl.Calls(faultlog.OpAppend), fl.Hits(faultlog.OpRead))
			}
			if got.Status != want.Status || !reflect.DeepEqual(got.Steps, want.Steps) || !reflect.DeepEqual(got.Results, want.Results) {
				t.Fatalf("under faults: %s %v %v\nclean: %s %v %v", got.Status, got.Steps, got.Results, want.Status, want.Steps, want.Results)
			}
			evs, err := eventlog.Log(fl).Read(ctx, id, 0, 0)
			for err != nil {
				evs, err = eventlog.Log(fl).Read(ctx, id, 0, 0)
			}
			folded, err := engine.Fold(id, evs)
			if err != nil || folded.Status != engine.StatusCompleted {
				t.Fatalf("the log folds to %v: %v", folded, err)
			}
			t.Logf("%s: %d of %d appends failed or slowed, %d reads failed, %d events", name,
				fl.Hits(faultlog.OpAppend), fl.Calls(faultlog.OpAppend), fl.Hits(faultlog.OpRead), len(evs))
		})
	}
}

// levelCounter is a slog handler that counts records by level and
// message, whatever the level.
type levelCounter struct {
	mu    *sync.Mutex
	count map[string]int // "LEVEL message"
}

func (h levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h levelCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.count[r.Level.String()+" "+r.Message]++
	return nil
}
func (h levelCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h levelCounter) WithGroup(string) slog.Handler      { return h }

// TestLogOutageSaidOnce: appends that keep failing (a full disk, a log
// server restarting) are said once as an error, and their end once with
// the count; each failed append was an ERROR line, every few seconds of
// an outage of minutes.
func TestLogOutageSaidOnce(t *testing.T) {
	t.Parallel()
	fl := faultlog.New(eventlog.NewMemory())
	const failures = 4
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: failures, Match: faultlog.HasType(eventlog.TypeCommandCompleted)})
	h := levelCounter{mu: &sync.Mutex{}, count: map[string]int{}}
	b := setupWith(t, engine.Config{Log: fl, Logger: slog.New(h)})
	sum, evs := b.run(t, twoSteps, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || fl.Hits(faultlog.OpAppend) != failures {
		t.Fatalf("status %s after %d injected failures: %s", sum.Status, fl.Hits(faultlog.OpAppend), sum.Error)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	const failed = "event log append failed; reloading the executions from the log"
	if e, d, ok := h.count["ERROR "+failed], h.count["DEBUG "+failed], h.count["INFO event log appends go through again"]; e != 1 || d != failures-1 || ok != 1 {
		t.Fatalf("%d failed appends said %d times as errors, %d at debug, their end %d times; want once, %d, once",
			failures, e, d, ok, failures-1)
	}
	// The report they carried is said waiting once too. It is sent again
	// at least once per failed append, and may be once more if it comes
	// while the execution is being reloaded after one: every time past
	// the first is said at debug.
	const again = "report not recorded; sending it again"
	if w, d := h.count["WARN "+again], h.count["DEBUG "+again]; w != 1 || d < failures-1 {
		t.Fatalf("a report sent again after %d failed appends said so %d times at warn, %d at debug; want once, then at least %d", failures, w, d, failures-1)
	}
}
