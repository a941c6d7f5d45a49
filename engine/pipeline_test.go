package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/faultlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
)

// heldDispatcher keeps the commands dispatched to it; the test runs them.
type heldDispatcher struct {
	mu   sync.Mutex
	cmds []*Command
	more chan struct{}
}

func newHeldDispatcher() *heldDispatcher { return &heldDispatcher{more: make(chan struct{}, 1)} }

func (d *heldDispatcher) Dispatch(cmd *Command) {
	d.mu.Lock()
	d.cmds = append(d.cmds, cmd)
	d.mu.Unlock()
	select {
	case d.more <- struct{}{}:
	default:
	}
}
func (d *heldDispatcher) Durable() bool { return true }
func (d *heldDispatcher) Cancel(string) {}

func (d *heldDispatcher) dispatched() []*Command {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.cmds)
}

// wait returns the dispatched commands once there are at least n.
func (d *heldDispatcher) wait(ctx context.Context, t *testing.T, n int) []*Command {
	t.Helper()
	for {
		if cmds := d.dispatched(); len(cmds) >= n {
			return cmds
		}
		select {
		case <-d.more:
		case <-ctx.Done():
			t.Fatalf("%d commands dispatched, want %d", len(d.dispatched()), n)
		}
	}
}

// waitFor polls cond until it holds.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

func parallelLoop(n int) string {
	return `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t}
workflow:
  - step: start
    loop:
      in: '{{ range(` + strconv.Itoa(n) + `) | list }}'
      iterator: item
      spec: {mode: parallel, max_in_flight: ` + strconv.Itoa(n) + `}
    tool: {kind: ok}
    next: [after]
  - step: after
    tool: {kind: ok}
`
}

// pipelineEngine is an engine whose commands go to a heldDispatcher, on a
// fake clock that does not move (no lease runs out, no tick fires).
func pipelineEngine(t *testing.T, fl *faultlog.Log) (*Engine, *heldDispatcher) {
	t.Helper()
	d := newHeldDispatcher()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := testEngine(t, Config{Log: fl, Dispatcher: d, Clock: clk, CommandLease: time.Hour, Tick: time.Hour})
	return e, d
}

// runAsync executes cmd in the background and sends its report's answer
// on the returned channel.
func runAsync(e *Engine, cmd *Command) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- e.worker.Execute(context.Background(), cmd, e.orch) }()
	return ch
}

// TestGroupCommitWhileAnAppendIsInFlight: the append carrying the first
// report is held; the other reports are folded and decided meanwhile (the
// loop does not wait for the log), nobody hears back and nothing is
// dispatched until the log has them, and once the held append returns they
// all go to the log in one append.
func TestGroupCommitWhileAnAppendIsInFlight(t *testing.T) {
	t.Parallel()
	const n = 12
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bl := logtest.NewRecorder(eventlog.NewMemory())
	fl := faultlog.New(bl)
	e, d := pipelineEngine(t, fl)
	id, err := e.Start(ctx, []byte(parallelLoop(n)), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cmds := d.wait(ctx, t, n)
	gate := make(chan struct{})
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, Gate: gate, Match: faultlog.HasType(eventlog.TypeCommandCompleted)})
	appends0, _ := e.orch.appendStats()
	folded0 := e.orch.folded.Load()
	answers := []<-chan error{runAsync(e, cmds[0])}
	waitFor(ctx, t, "the first report's append", func() bool { return fl.Hits(faultlog.OpAppend) == 1 })
	for _, cmd := range cmds[1:] {
		answers = append(answers, runAsync(e, cmd))
	}
	// Each command is two messages: its worker's first heartbeat, sent as
	// it starts, and its report.
	waitFor(ctx, t, "the other reports to be folded", func() bool { return e.orch.folded.Load() >= folded0+2*n })
	for i, ch := range answers {
		select {
		case err := <-ch:
			t.Fatalf("report %d answered (%v) before the log had it", i, err)
		default:
		}
	}
	if got := len(d.dispatched()); got != n {
		t.Fatalf("%d commands dispatched while the reports were not recorded, want %d", got, n)
	}
	close(gate)
	for i, ch := range answers {
		if err := <-ch; err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	after := d.wait(ctx, t, n+1)[n]
	if after.Step != "after" {
		t.Fatalf("dispatched %s after the loop, want step after", after.ID)
	}
	if err := <-runAsync(e, after); err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != StatusCompleted {
		t.Fatalf("%v %+v", err, sum)
	}
	// One append for the held report, one for all the others.
	var withReports []int
	for _, c := range bl.Counts(eventlog.TypeCommandCompleted) {
		if c > 0 {
			withReports = append(withReports, c)
		}
	}
	if !slices.Equal(withReports, []int{1, n - 1, 1}) {
		t.Fatalf("command.completed per append %v, want [1 %d 1]", withReports, n-1)
	}
	appends, events := e.orch.appendStats()
	t.Logf("%d reports in %d appends (%d events)", n+1, appends-appends0, events)
	if appends-appends0 >= n+1 {
		t.Fatalf("%d appends for %d reports: no group commit", appends-appends0, n+1)
	}
}

// TestFailedAppendDropsTheBatchDecidedOnIt: the append carrying one
// report fails while another report, and the decisions it led to (the
// loop done, the next step issued), were folded on top of it. Nothing of
// the later batch reaches the log or the dispatcher, both reporters hear
// ErrUnavailable, and once they send again the execution completes with
// one loop.done and one run of the next step.
func TestFailedAppendDropsTheBatchDecidedOnIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bl := logtest.NewRecorder(eventlog.NewMemory())
	fl := faultlog.New(bl)
	e, d := pipelineEngine(t, fl)
	id, err := e.Start(ctx, []byte(parallelLoop(2)), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cmds := d.wait(ctx, t, 2)
	gate := make(chan struct{})
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, Gate: gate, Fail: true, Match: faultlog.HasType(eventlog.TypeCommandCompleted)})
	folded0 := e.orch.folded.Load()
	first := runAsync(e, cmds[0])
	waitFor(ctx, t, "the first report's append", func() bool { return fl.Hits(faultlog.OpAppend) == 1 })
	second := runAsync(e, cmds[1])
	// Two messages per command: the first heartbeat and the report.
	waitFor(ctx, t, "the second report to be folded", func() bool { return e.orch.folded.Load() >= folded0+4 })
	close(gate)
	for i, ch := range []<-chan error{first, second} {
		if err := <-ch; !errors.Is(err, ErrUnavailable) {
			t.Fatalf("report %d: %v, want ErrUnavailable", i, err)
		}
	}
	stored, err := bl.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range stored {
		switch {
		case ev.Type == eventlog.TypeCommandCompleted, ev.Type == eventlog.TypeLoopDone, ev.Step == "after":
			t.Fatalf("%s of %s %s reached the log", ev.Type, ev.Step, ev.CommandID)
		}
	}
	if got := len(d.dispatched()); got != 2 {
		t.Fatalf("%d commands dispatched, want the 2 of the loop only", got)
	}
	// The log answers again: the reports are sent again (as a worker does
	// on ErrUnavailable), the execution reloaded and finished.
	for _, cmd := range cmds {
		for {
			err := <-runAsync(e, cmd)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("report of %s sent again: %v", cmd.ID, err)
			}
		}
	}
	after := d.wait(ctx, t, 3)[2]
	if after.Step != "after" {
		t.Fatalf("dispatched %s, want step after", after.ID)
	}
	if err := <-runAsync(e, after); err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != StatusCompleted {
		t.Fatalf("%v %+v", err, sum)
	}
	stored, err = bl.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, ev := range stored {
		count[ev.Type]++
		if ev.Type == eventlog.TypeCommandIssued && ev.Step == "after" {
			count["after issued"]++
		}
	}
	if count[eventlog.TypeLoopDone] != 1 || count["after issued"] != 1 || count[eventlog.TypeCommandCompleted] != 3 {
		t.Fatalf("history counts %v, want one loop.done, one after issued, three command.completed", count)
	}
}

// TestDuplicateDropsTheBatchDecidedOnIt: a second orchestrator drives the
// same execution on a stale state; its decision comes back a duplicate
// while a cancel was folded on top of it. The execution is reloaded, the
// cancel is not recorded (the caller hears ErrUnavailable), and nothing
// of either batch is dispatched.
func TestDuplicateDropsTheBatchDecidedOnIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem := eventlog.NewMemory()
	a, da := pipelineEngine(t, faultlog.New(mem))
	flB := faultlog.New(mem)
	b, db := pipelineEngine(t, flB)
	id, err := a.Start(ctx, []byte(flow), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := da.wait(ctx, t, 1)[0]
	if err := b.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := <-runAsync(a, first); err != nil {
		t.Fatal(err)
	}
	da.wait(ctx, t, 2) // a issued second
	gate := make(chan struct{})
	flB.Inject(faultlog.Fault{Op: faultlog.OpAppend, Times: 1, Gate: gate, Match: faultlog.HasType(eventlog.TypeCommandIssued)})
	folded0 := b.orch.folded.Load()
	stale := runAsync(b, first) // b still has start in flight: it decides second again
	waitFor(ctx, t, "b's append", func() bool { return flB.Hits(faultlog.OpAppend) == 1 })
	cancelled := make(chan error, 1)
	go func() { cancelled <- b.Cancel(ctx, id) }()
	// The first heartbeat and the report of first, then the cancel.
	waitFor(ctx, t, "the cancel to be folded", func() bool { return b.orch.folded.Load() >= folded0+3 })
	close(gate)
	if err := <-stale; err != nil {
		t.Fatalf("b's report: %v", err)
	}
	if err := <-cancelled; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("cancel decided on the refused state: %v, want ErrUnavailable", err)
	}
	if got := db.dispatched(); len(got) != 0 {
		t.Fatalf("b dispatched %d commands on a state the log refused", len(got))
	}
	evs, err := mem.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	issued := 0
	for _, ev := range evs {
		switch ev.Type {
		case eventlog.TypeCancelRequested:
			t.Fatal("the cancel folded on the refused state reached the log")
		case eventlog.TypeCommandIssued:
			issued++
		}
	}
	if issued != 2 {
		t.Fatalf("%d command.issued in the log, want 2 (start, second once)", issued)
	}
}
