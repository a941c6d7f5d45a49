package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
)

// wireDispatcher runs every command as a transport does: encoded with
// EncodeCommand, decoded with DecodeCommand (the playbook travels apart),
// then run on the engine's worker. It keeps the size of each step's
// encoded command.
type wireDispatcher struct {
	eng   func() *engine.Engine
	root  context.Context
	wg    sync.WaitGroup
	mu    sync.Mutex
	sizes map[string]int
}

func (d *wireDispatcher) Dispatch(cmd *engine.Command) {
	b, err := engine.EncodeCommand(cmd)
	if err != nil {
		panic(err)
	}
	d.mu.Lock()
	d.sizes[cmd.Step] = len(b)
	d.mu.Unlock()
	got, err := engine.DecodeCommand(b)
	if err != nil {
		panic(err)
	}
	got.Playbook = cmd.Playbook
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		_ = d.eng().Worker().Execute(d.root, got, d.eng().Reporter())
	}()
}
func (d *wireDispatcher) Durable() bool             { return false }
func (d *wireDispatcher) Cancel(executionID string) { d.eng().Worker().Cancel(executionID) }

// TestCommandsCarryStepResultsOnce: a step's result is read as STEP,
// ctx.STEP and workload.STEP (NoETL's variables hold it), but a command
// shipped to a worker carries it once: a 100 KB result made every later
// command 300 KB bigger, so a playbook with a result near 350 KB passed
// NATS's 1 MB message limit. The worker reads all three names the same.
func TestCommandsCarryStepResultsOnce(t *testing.T) {
	t.Parallel()
	root, stop := context.WithCancel(context.Background())
	d := &wireDispatcher{root: root, sizes: map[string]int{}}
	var b *bundle
	d.eng = func() *engine.Engine { return b.eng }
	b = setupWith(t, engine.Config{Dispatcher: d})
	t.Cleanup(func() { stop(); d.wg.Wait() })
	const n = 100_000
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: a, v: '{{ "x" * 100000 }}'}
    next: [read]
  - step: read
    tool:
      kind: rec
      key: read
      top: '{{ start.v | length }}'
      ctx: '{{ ctx.start.v | length }}'
      wl: '{{ workload.start.v | length }}'
      status: '{{ ctx.start.status }}'
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("execution %s: %s", sum.Status, sum.Error)
	}
	got := data(t, sum, "read")
	for _, k := range []string{"top", "ctx", "wl"} {
		if got[k] != int64(n) {
			t.Errorf("read saw %s %v, want %d", k, got[k], n)
		}
	}
	if got["status"] != "success" {
		t.Errorf("read saw ctx.start.status %v", got["status"])
	}
	d.mu.Lock()
	size := d.sizes["read"]
	d.mu.Unlock()
	if size > n+n/2 {
		t.Fatalf("read's command is %d bytes for a %d-byte result: the result is carried more than once", size, n)
	}
}
