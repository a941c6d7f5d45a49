package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/playbook"
)

// subEngine is an engine with `rec` and `playbook` tools and few workers.
func subEngine(t testing.TB, log eventlog.Log, workers int) (*engine.Engine, *recorder) {
	t.Helper()
	b := setupWith(t, engine.Config{Log: log, Workers: workers})
	b.reg.MustRegister("playbook", playbook.New(b.eng))
	return b.eng, b.rec
}

// writeChild writes a child playbook next to the parent's file.
func writeChild(t *testing.T, dir, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "child.yaml"), []byte(header+src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// doublingChild is a child playbook (child.yaml, see writeChild) that
// doubles its workload's n.
const doublingChild = `
workload: {n: 0}
workflow:
  - step: start
    tool: {kind: rec, key: 'child-{{ n }}', doubled: '{{ n * 2 }}'}
    next: [end]
  - step: end
    tool: {kind: rec, key: 'end-{{ n }}'}
`

// parentOfChildren is a parent whose parallel loop over in runs
// doublingChild per item, then sums what the children returned.
func parentOfChildren(in string) string {
	return header + `
workflow:
  - step: start
    loop:
      in: '` + in + `'
      iterator: i
      spec: {mode: parallel}
    tool:
      - name: child
        kind: playbook
        path: child.yaml
        workload: {n: '{{ iter.i }}'}
      - name: after
        kind: rec
        key: 'after-{{ iter.i }}'
        got: '{{ child.steps.start.data.doubled }}'
    next:
      - step: sum
        when: '{{ event.name == "loop.done" }}'
  - step: sum
    tool: {kind: rec, key: sum, total: '{{ start.results | map(attribute="got") | sum }}'}
`
}

// TestSubPlaybooksDoNotHoldWorkers: a parallel loop of 48 sub-playbooks
// on 4 workers completes. Before, each parent item held its worker while
// its child waited for a worker: all 4 held, nothing ran, forever.
func TestSubPlaybooksDoNotHoldWorkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeChild(t, dir, doublingChild)
	log := eventlog.NewMemory()
	e, rec := subEngine(t, log, 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := e.Start(ctx, []byte(parentOfChildren("{{ range(48) | list }}")), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatalf("%v: children ran %d", err, rec.count("child-0"))
	}
	evs, _ := log.Read(ctx, id, 0, 0)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	for i := range 48 {
		if rec.count("child-"+strconv.Itoa(i)) != 1 || rec.count("after-"+strconv.Itoa(i)) != 1 {
			t.Fatalf("item %d: child ran %d, after %d times", i, rec.count("child-"+strconv.Itoa(i)), rec.count("after-"+strconv.Itoa(i)))
		}
	}
	if got := data(t, sum, "sum")["total"]; got != int64(2*(47*48/2)) {
		t.Fatalf("sum of the children's results %v", got)
	}
}

// TestParkedSubPlaybooksResume: the process dies while parents wait for
// children that are running; resuming the parent alone in a new process
// loads its children too, and everything completes.
func TestParkedSubPlaybooksResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeChild(t, dir, `
workload: {n: 0}
workflow:
  - step: start
    tool: {kind: hold, key: 'child-{{ n }}'}
`)
	parent := header + `
workflow:
  - step: start
    loop:
      in: '{{ [1, 2, 3] }}'
      iterator: i
      spec: {mode: parallel}
    tool: {kind: playbook, path: child.yaml, workload: {n: '{{ iter.i }}'}}
`
	log := eventlog.NewMemory()
	newEngine := func(hold bool) *engine.Engine {
		reg := tools.NewRegistry()
		reg.MustRegister("hold", tools.ToolFunc(func(ctx context.Context, c *tools.Call) (tools.Output, error) {
			if hold {
				<-ctx.Done() // the first process dies with it running
				return tools.Output{}, ctx.Err()
			}
			return tools.Output{Status: tools.StatusSuccess, Data: c.Config["key"]}, nil
		}))
		e, err := engine.New(engine.Config{Log: log, Tools: reg, Workers: 2, Tick: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		reg.MustRegister("playbook", playbook.New(e))
		return e
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := newEngine(true)
	id, err := first.Start(ctx, []byte(parent), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until all three items are parked on their children.
	for seen := int64(0); ; {
		evs, err := log.Read(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if logtest.CountType(evs, eventlog.TypeCommandAwaiting) == 3 {
			break
		}
		seen = int64(len(evs))
		if err := log.Wait(ctx, id, seen); err != nil {
			t.Fatalf("the items never parked: %v", err)
		}
	}
	_ = first.Close()

	second := newEngine(false)
	if err := second.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	sum, err := second.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("%v %+v", err, sum)
	}
	res := sum.Results["start"].(map[string]any)["data"].([]any)
	if len(res) != 3 {
		t.Fatalf("results %v", res)
	}
	for i, r := range res {
		steps := r.(map[string]any)["steps"].(map[string]any)
		if got := steps["start"].(map[string]any)["data"]; got != "child-"+strconv.Itoa(i+1) {
			t.Fatalf("item %d: child result %v", i, got)
		}
	}
}

// TestShutdownLeavesASubPlaybookStepForResume: a step that would start a
// sub-playbook while the engine shuts down is handed back, not failed:
// the new process resumes it and the execution completes.
func TestShutdownLeavesASubPlaybookStepForResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeChild(t, dir, "workflow:\n  - step: start\n    tool: {kind: rec, key: child}\n")
	log := eventlog.NewMemory()
	gate, started := make(chan struct{}), make(chan struct{})
	reg := tools.NewRegistry()
	reg.MustRegister("gate", tools.ToolFunc(func(ctx context.Context, c *tools.Call) (tools.Output, error) {
		close(started)
		<-gate
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	first := setupWith(t, engine.Config{Log: log, Tools: reg})
	reg.MustRegister("playbook", playbook.New(first.eng))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := first.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool:
      - {name: wait, kind: gate}
      - {name: sub, kind: playbook, path: child.yaml}
`), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	shut := make(chan error, 1)
	go func() { shut <- first.eng.Shutdown(ctx) }()
	for {
		if _, err := first.eng.Driving(ctx); errors.Is(err, engine.ErrClosed) {
			break
		}
		time.Sleep(time.Millisecond) // Shutdown has not begun yet
	}
	close(gate)
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil || st.Status != engine.StatusRunning || st.Steps["start"] == "failed" {
		t.Fatalf("after Shutdown: %v %+v", err, st)
	}
	reg2 := tools.NewRegistry()
	reg2.MustRegister("gate", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	b2 := setupWith(t, engine.Config{Log: log, Tools: reg2})
	reg2.MustRegister("playbook", playbook.New(b2.eng))
	second := b2.eng
	if err := second.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if sum, err := second.Wait(ctx, id); err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("resumed: %v %+v", err, sum)
	}
}

// TestSubPlaybookStepTimeout: a sub-playbook step's spec.timeout bounds
// its child, as any step's bounds its tool: the step fails when the time
// is up, and the child, whose work is no longer wanted, is cancelled.
func TestSubPlaybookStepTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeChild(t, dir, `
workflow:
  - step: start
    tool: {kind: block}
`)
	b := setupWith(t, engine.Config{})
	b.reg.MustRegister("playbook", playbook.New(b.eng))
	b.reg.MustRegister("block", tools.ToolFunc(func(ctx context.Context, _ *tools.Call) (tools.Output, error) {
		<-ctx.Done() // a child step that would run long
		return tools.Output{}, ctx.Err()
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    spec: {timeout: 0.5}
    tool: {kind: playbook, path: child.yaml}
`), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := b.eng.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "no outcome within the step's timeout") {
		t.Fatalf("parent: %s %q, want failed for the timeout", sum.Status, sum.Error)
	}
	child, err := b.eng.Wait(ctx, id+"/start#1")
	if err != nil {
		t.Fatal(err)
	}
	if child.Status != engine.StatusCancelled {
		t.Fatalf("child: %s %q, want cancelled", child.Status, child.Error)
	}
}

// TestSubPlaybookRetryRunsTheChildAgain: a retried sub-playbook step runs
// a fresh child on each attempt (the child here fails its first run
// only), and two sub-playbook tasks of one pipeline run a child each.
// Before, every call of the command got the first child back: a retry
// "failed" at once without running anything, and the pipeline's second
// task returned the first task's child.
func TestSubPlaybookRetryRunsTheChildAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeChild(t, dir, `
workload: {key: flaky, fail: 1}
workflow:
  - step: start
    tool: {kind: rec, key: '{{ key }}', fail: '{{ fail }}', n: '{{ key }}'}
`)
	b := setupWith(t, engine.Config{})
	b.reg.MustRegister("playbook", playbook.New(b.eng))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: playbook, path: child.yaml}
    retry: {max_attempts: 3, initial_delay: 0.01}
    next: [pipe]
  - step: pipe
    tool:
      - {name: one, kind: playbook, path: child.yaml, workload: {key: one, fail: 0}}
      - {name: two, kind: playbook, path: child.yaml, workload: {key: two, fail: 0}}
`), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := b.eng.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("parent: %s %q, want completed on the retry", sum.Status, sum.Error)
	}
	if n := b.rec.count("flaky"); n != 2 {
		t.Errorf("the flaky child ran %d times, want 2 (failed, then retried)", n)
	}
	if one, two := b.rec.count("one"), b.rec.count("two"); one != 1 || two != 1 {
		t.Errorf("the pipeline's children ran %d and %d times, want once each", one, two)
	}
}

// orphaning is a parent whose branch bad fails beside step sub, whose
// child's tool (stubborn) ignores its cancellation until release closes;
// bad fails once failNow closes, after the child's tool started.
type orphaning struct {
	b                *bundle
	id, child        string
	release, failNow chan struct{}
}

// startOrphaning starts the parent of orphaning on b and waits for its
// child's tool to start.
func startOrphaning(t *testing.T, ctx context.Context, b *bundle) *orphaning {
	t.Helper()
	dir := t.TempDir()
	writeChild(t, dir, `
workflow:
  - step: start
    tool: {kind: stubborn}
`)
	b.reg.MustRegister("playbook", playbook.New(b.eng))
	o := &orphaning{b: b, release: make(chan struct{}), failNow: make(chan struct{})}
	started := make(chan struct{})
	b.reg.MustRegister("stubborn", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		close(started)
		<-o.release // ignores its cancellation until released
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	b.reg.MustRegister("failer", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		<-o.failNow
		return tools.Output{Status: tools.StatusError, Error: "boom"}, nil
	}))
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: rec, key: start}
    next:
      spec: {mode: inclusive}
      arcs: [{step: sub}, {step: bad}]
  - step: sub
    tool: {kind: playbook, path: child.yaml}
  - step: bad
    tool: {kind: failer}
`), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	o.id, o.child = id, id+"/sub#1"
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the child's tool did not start")
	}
	return o
}

// parentFails lets bad fail and waits for the parent to end failed.
func (o *orphaning) parentFails(t *testing.T, ctx context.Context) {
	t.Helper()
	close(o.failNow)
	if sum, err := o.b.eng.Wait(ctx, o.id); err != nil || sum.Status != engine.StatusFailed {
		t.Fatalf("parent: %v %v, want failed", sum, err)
	}
}

// TestOrphanCancelledOnce: a child already asked to cancel (its tool
// still finishing) when its parent ends is not asked again. Before, the
// parent's end recorded a second cancel.requested for it, whenever a
// host's Cancel of the child came first (the cursorflow CLI cancels a
// run's children once the run ended).
func TestOrphanCancelledOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := setupWith(t, engine.Config{})
	o := startOrphaning(t, ctx, b)
	child := o.child
	if err := b.eng.Cancel(ctx, child); err != nil {
		t.Fatal(err)
	}
	o.parentFails(t, ctx)
	close(o.release)
	if sum, err := b.eng.Wait(ctx, child); err != nil || sum.Status != engine.StatusCancelled {
		t.Fatalf("child: %v %v, want cancelled", sum, err)
	}
	events, err := b.log.Read(ctx, child, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range events {
		if ev.Type == eventlog.TypeCancelRequested {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("child has %d cancel.requested events, want 1", n)
	}
}

// TestResumedOrphanIsCancelled: a sub-playbook execution left running in
// the log after its parent ended (the process died before it recorded the
// child's cancel) is cancelled when resumed, not run on. Before, the
// resume ran the child's work to its end, for a parent long failed.
func TestResumedOrphanIsCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The first process: the parent fails beside its running child.
	first := setupWith(t, engine.Config{})
	o := startOrphaning(t, ctx, first)
	defer close(o.release)
	id, child := o.id, o.child
	o.parentFails(t, ctx)
	// What the log holds had that process died right after the parent's
	// end: all of the parent, the child before its cancel.
	log := eventlog.NewMemory()
	for _, exec := range []string{id, child} {
		events, err := first.log.Read(ctx, exec, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var keep []eventlog.Event
		for _, ev := range events {
			if ev.Type == eventlog.TypeCancelRequested {
				break
			}
			ev.Seq, ev.ID = 0, 0
			keep = append(keep, ev)
		}
		if _, err := log.Append(ctx, keep); err != nil {
			t.Fatal(err)
		}
	}
	// The second process resumes the child: its tool would complete at
	// once, so it must not be called at all (the cancel is recorded
	// before the child's work is issued again).
	second := setupWith(t, engine.Config{Log: log})
	second.reg.MustRegister("playbook", playbook.New(second.eng))
	var ran atomic.Int32
	second.reg.MustRegister("stubborn", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		ran.Add(1)
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	if err := second.eng.Resume(ctx, child); err != nil {
		t.Fatal(err)
	}
	if sum, err := second.eng.Wait(ctx, child); err != nil || sum.Status != engine.StatusCancelled {
		t.Fatalf("resumed orphan: %+v %v, want cancelled", sum, err)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the resumed orphan's tool ran %d times, want 0", n)
	}
}

// TestChildFailureNamesTheChild: a sub-playbook step whose child failed
// fails with an error that names the child execution and the child's step
// before the child's own error. Before, the parent said "failed at step
// start: planned failure 1", as if its own step had failed so.
func TestChildFailureNamesTheChild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeChild(t, dir, `
workflow:
  - step: start
    tool: {kind: rec, key: begin}
    next: [fetch]
  - step: fetch
    tool: {kind: rec, key: child, fail: 1}
`)
	b := setupWith(t, engine.Config{})
	b.reg.MustRegister("playbook", playbook.New(b.eng))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: playbook, path: child.yaml}
`), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := b.eng.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := "sub-playbook execution " + id + "/start#1 failed at step fetch: planned failure 1"
	if sum.Status != engine.StatusFailed || sum.Step != "start" || sum.Error != want {
		t.Fatalf("parent: %s at %s: %q, want failed at start: %q", sum.Status, sum.Step, sum.Error, want)
	}
}

// TestResumeCancelsDrivenOrphan: Resume of a sub-playbook execution this
// engine drives already, whose awaiter has ended in the log (it ended
// elsewhere: another engine drove it), cancels it too, as it does one it
// loads.
func TestResumeCancelsDrivenOrphan(t *testing.T) {
	t.Parallel()
	b := setupWith(t, engine.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	parent, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: rec}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := b.eng.Wait(ctx, parent); err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("parent: %+v %v", sum, err)
	}
	blocked := make(chan struct{})
	b.reg.MustRegister("block", tools.ToolFunc(func(ctx context.Context, _ *tools.Call) (tools.Output, error) {
		close(blocked)
		<-ctx.Done()
		return tools.Output{}, ctx.Err()
	}))
	child, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: block}
`), engine.StartOptions{ExecutionID: parent + "/start#1", Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-blocked:
	case <-ctx.Done():
		t.Fatal("the child's tool did not start")
	}
	if err := b.eng.Resume(ctx, child); err != nil {
		t.Fatal(err)
	}
	if sum, err := b.eng.Wait(ctx, child); err != nil || sum.Status != engine.StatusCancelled {
		t.Fatalf("child: %+v %v, want cancelled", sum, err)
	}
}
