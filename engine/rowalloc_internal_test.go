package engine

import (
	"context"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/tools"
)

type otherKey struct{}

// A row's context carries its partial sink in one allocation (it was a
// value context and the boxed sink), reaches the parent's values and
// cancellation, and the row's partials are tagged with the row.
func TestRowPartialContext(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), otherKey{}, "kept"))
	// started: the queue is read here, not by a goroutine that would
	// report it.
	p := &partials{lim: PartialLimits{MaxEvents: 10, MaxBytes: 1 << 10, Burst: 10, PerSecond: 1}, tokens: 10,
		last: time.Now(), wake: make(chan struct{}, 1), started: true}
	ctx := withPartials(parent, p, "row-7")
	if n := testing.AllocsPerRun(100, func() { _ = withPartials(parent, p, "row-7") }); n > 1 {
		t.Errorf("a row's partial context makes %v allocations, want 1", n)
	}
	if v := ctx.Value(otherKey{}); v != "kept" {
		t.Errorf("the parent's value reads %v", v)
	}
	emit := partialFunc(ctx, "task", nil)
	if emit == nil {
		t.Fatal("no partial function under the row's context")
	}
	emit(map[string]any{"n": 1})
	if len(p.queue) != 1 || p.queue[0].Row != "row-7" || p.queue[0].Task != "task" || string(p.queue[0].Data) != `{"n":1}` {
		t.Errorf("queued %+v", p.queue)
	}
	if partialFunc(withPartials(parent, nil, ""), "task", nil) != nil {
		t.Error("a partial function without partials")
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	cancel()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the parent did not reach a context made under the row's")
	}
	if context.Cause(child) != context.Canceled {
		t.Errorf("cause %v", context.Cause(child))
	}
}

// A command's recording keychain is made once, not for every task it
// runs, records what it resolves, and is the worker's own: another worker
// running under the same context resolves through its keychain.
func TestRecordingKeychainOncePerCommand(t *testing.T) {
	w := &Worker{Keychain: tools.StaticURLs(map[string]string{"pg": "postgres://a"})}
	ctx := withSecrets(context.Background())
	kc := w.keychain(ctx)
	if n := testing.AllocsPerRun(100, func() { _ = w.keychain(ctx) }); n != 0 {
		t.Errorf("a task's keychain makes %v allocations, want 0", n)
	}
	if c, err := kc.Resolve(ctx, "pg"); err != nil || c.URL != "postgres://a" {
		t.Fatalf("Resolve = %v, %v", c, err)
	}
	seen := ctx.Value(secretsKey{}).(*secretsSeen)
	if got := seen.secrets().RedactValue("at postgres://a"); got != "at "+tools.Redacted {
		t.Errorf("the recorded credential redacts %q", got)
	}
	w2 := &Worker{Keychain: tools.StaticURLs(map[string]string{"pg": "postgres://b"})}
	if c, err := w2.keychain(ctx).Resolve(ctx, "pg"); err != nil || c.URL != "postgres://b" {
		t.Errorf("another worker's Resolve = %v, %v", c, err)
	}
	if got := seen.secrets().RedactValue("postgres://a postgres://b"); got != tools.Redacted+" "+tools.Redacted {
		t.Errorf("the two recorded credentials redact %q", got)
	}
	if (&Worker{}).keychain(ctx) != nil {
		t.Error("a worker without a keychain got one")
	}
}

type okTool struct{}

func (okTool) Execute(context.Context, *tools.Call) (tools.Output, error) { return tools.Output{}, nil }

// A task that succeeds costs its configuration map, its Call and its
// output map (header and slots): the check of whether a failure came from
// a spec.timeout no longer puts a variable on the heap for every task.
func TestRunToolAllocations(t *testing.T) {
	reg := tools.NewRegistry()
	if err := reg.Register("ok", okTool{}); err != nil {
		t.Fatal(err)
	}
	w := &Worker{Tools: reg}
	cmd := &Command{ExecutionID: "e", Base: "c"}
	step, task := &dsl.Step{Name: "s"}, &dsl.Task{Kind: "ok"}
	ctx := withSecrets(context.Background())
	view := map[string]any{}
	out, _, err := w.runTool(ctx, cmd, step, task, view, nil, 1, nil, false)
	if err != nil || out["status"] != "success" {
		t.Fatalf("runTool = %v, %v", out, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = w.runTool(ctx, cmd, step, task, view, nil, 1, nil, false) }); n > 4 {
		t.Errorf("a task's run makes %v allocations, want at most 4", n)
	}
}
