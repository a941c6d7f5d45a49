package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// bigFlow makes a 3 MB result, routes on it, reads it in later steps and
// loops over part of it into a loop whose aggregate is over 64 KiB too.
const bigFlow = header + `
workload: {n: 3000}
workflow:
  - step: start
    tool: {kind: big, n: '{{ n }}'}
    next:
      - step: use
        when: '{{ start.rows | length == n }}'
  - step: use
    tool:
      kind: echo
      count: '{{ start.rows | length }}'
      last: '{{ (start.rows | last).id }}'
    next: [fan]
  - step: fan
    loop:
      in: '{{ start.rows[:100] }}'
      iterator: row
      spec: {mode: parallel, max_in_flight: 8}
    tool: {kind: echo, id: '{{ iter.row.id }}', pad: '{{ iter.row.pad }}'}
    next:
      - step: after
        when: '{{ event.name == "loop.done" }}'
  - step: after
    tool:
      kind: echo
      items: '{{ fan.results | length }}'
      first: '{{ fan.results[0].id }}'
`

func bigTools() *tools.Registry {
	reg := tools.NewRegistry()
	reg.MustRegister("big", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		n := call.Config["n"].(int64)
		rows := make([]any, n)
		for i := range rows {
			rows[i] = map[string]any{"id": int64(i), "pad": strings.Repeat("x", 1000)}
		}
		return map[string]any{"rows": rows}, nil
	}))
	reg.MustRegister("echo", fn.New(func(ctx context.Context, call *tools.Call) (any, error) { return call.Config, nil }))
	return reg
}

func payloadBytes(evs []eventlog.Event) (total int, largest int, largestType string) {
	for _, ev := range evs {
		total += len(ev.Payload)
		if len(ev.Payload) > largest {
			largest, largestType = len(ev.Payload), ev.Type
		}
	}
	return
}

// TestLargeResultsStored: with a result store, a 3 MB result and a loop
// aggregate over the threshold travel as references: no event carries
// them, and templates that read them (an arc, later steps, a loop's in)
// see the stored values. Without a store the same flow writes them into
// the log; the test logs both sizes.
func TestLargeResultsStored(t *testing.T) {
	t.Parallel()
	store := fileStore(t)

	runWith := func(store *resultstore.Store) (*engine.Summary, []eventlog.Event) {
		log := eventlog.NewMemory()
		eng, err := engine.New(engine.Config{Log: log, Tools: bigTools(), Results: store, Tick: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = eng.Close() })
		return (&bundle{log: log, eng: eng}).run(t, bigFlow, nil)
	}
	sum, evs := runWith(store)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("with the store: %s %s", sum.Status, sum.Error)
	}
	use := data(t, sum, "use")
	if use["count"] != int64(3000) || use["last"] != int64(2999) {
		t.Fatalf("use read %v", use)
	}
	after := data(t, sum, "after")
	if after["items"] != int64(100) || after["first"] != "0" && after["first"] != int64(0) {
		t.Fatalf("after read %v", after)
	}
	total, largest, typ := payloadBytes(evs)
	if largest > 16<<10 {
		t.Fatalf("the largest event payload (%s) is %d bytes with the store", typ, largest)
	}
	refs := 0
	for _, ev := range evs {
		if strings.Contains(string(ev.Payload), resultstore.MarkerKey) {
			refs++
		}
	}
	if refs < 3 { // start's command.completed and step.completed, fan's loop.done
		t.Fatalf("%d events hold references", refs)
	}

	plain, plainEvs := runWith(nil)
	if plain.Status != engine.StatusCompleted {
		t.Fatalf("without a store: %s %s", plain.Status, plain.Error)
	}
	plainTotal, plainLargest, _ := payloadBytes(plainEvs)
	if plainLargest < 3_000_000 {
		t.Fatalf("without a store the largest payload is %d bytes; the 3 MB result should be inline", plainLargest)
	}
	t.Logf("event-log payload bytes for the execution: %d with the store (largest %d), %d without (largest %d)",
		total, largest, plainTotal, plainLargest)
}

// TestStoredResultCorrupted: a stored result changed behind the engine's
// back is refused when a template reads it, naming the step and field.
func TestStoredResultCorrupted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "results")
	store, err := resultstoreurl.Open(ctx, "file://"+dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reg := bigTools()
	opened := make(chan struct{})
	reg.MustRegister("gate", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		select {
		case <-opened:
			return "open", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}))
	log := eventlog.NewMemory()
	eng, err := engine.New(engine.Config{Log: log, Tools: reg, Results: store, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	id, err := eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: big, n: 200}
    next: [wait]
  - step: wait
    tool: {kind: gate}
    next: [read]
  - step: read
    tool: {kind: echo, count: '{{ start.rows | length }}'}
`), engine.StartOptions{File: "corrupt.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	// Once start's completion is recorded (its result was stored before
	// it was reported), change the stored result.
	for seen := int64(0); ; {
		if err := log.Wait(ctx, id, seen); err != nil {
			t.Fatal(err)
		}
		evs, err := log.Read(ctx, id, seen, 0)
		if err != nil {
			t.Fatal(err)
		}
		done := false
		for _, ev := range evs {
			seen = ev.Seq
			done = done || ev.Type == eventlog.TypeCommandCompleted && ev.Step == "start"
		}
		if done {
			break
		}
	}
	var stored []string
	if err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(p, ".json") {
			stored = append(stored, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 {
		t.Fatalf("stored objects %v, want start's result", stored)
	}
	if err := os.WriteFile(stored[0], []byte(`{"rows":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	close(opened)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sum, err := eng.Wait(wctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusFailed || sum.Step != "read" || !strings.Contains(sum.Error, "does not match its reference") {
		t.Fatalf("summary %+v: want read to fail on the changed stored result", sum)
	}
	if !strings.Contains(sum.Field, "count") && !strings.Contains(sum.Error, "count") {
		t.Fatalf("the failure names neither the field nor its template: %+v", sum)
	}
}

// TestOutputStoreHonoured: NoETL's output block decides per step: an
// explicit store kind stores even a small result, memory keeps a large one
// inline, inline_max_bytes lowers the threshold; an engine without a store
// refuses a playbook that asks for one, naming where.
func TestOutputStoreHonoured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := resultstoreurl.Open(ctx, "mem://", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	src := header + `
workflow:
  - step: start
    tool: {kind: big, n: 2, output: {store: {kind: s3}}}
    next: [keep]
  - step: keep
    output: {store: {kind: memory}}
    tool: {kind: big, n: 200}
    next: [low]
  - step: low
    tool:
      kind: big
      n: 2
      output: {store: {kind: auto}, inline_max_bytes: 100}
    next: [read]
  - step: read
    tool: {kind: echo, a: '{{ start.rows | length }}', b: '{{ keep.rows | length }}', c: '{{ low.rows | length }}'}
`
	log := eventlog.NewMemory()
	eng, err := engine.New(engine.Config{Log: log, Tools: bigTools(), Results: store, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	sum, evs := (&bundle{log: log, eng: eng}).run(t, src, nil)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("%s %s", sum.Status, sum.Error)
	}
	if r := data(t, sum, "read"); r["a"] != int64(2) || r["b"] != int64(200) || r["c"] != int64(2) {
		t.Fatalf("read %v", r)
	}
	stored := map[string]bool{}
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandCompleted {
			stored[ev.Step] = strings.Contains(string(ev.Payload), resultstore.MarkerKey)
		}
	}
	if !stored["start"] || stored["keep"] || !stored["low"] || stored["read"] {
		t.Fatalf("stored per step %v: want start (kind s3) and low (inline_max_bytes 100), not keep (memory)", stored)
	}

	plain, err := engine.New(engine.Config{Log: eventlog.NewMemory(), Tools: bigTools()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	_, err = plain.Start(ctx, []byte(src), engine.StartOptions{File: "out.yaml"})
	if err == nil || !strings.Contains(err.Error(), "out.yaml:7:52") || !strings.Contains(err.Error(), "output.store.kind s3") {
		t.Fatalf("Start without a store: %v", err)
	}
}
