package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/internal/sqlitetest"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/noop"
	"github.com/cursorflow/cursorflow/tools/playbook"
)

// The fold decodes every payload with jsonnum.Unmarshal, which reads a
// struct member by member where it can. Over the histories of real
// executions (a chain with arcs, args, ctx and a failing step's policy;
// a cursor loop entered three times; a fan-out of sub-playbooks), every
// payload decoded as every payload type must equal what encoding/json's
// Decoder makes of it, error for error.
func TestPayloadDecodingMatchesTheDecoder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "child.yaml"), []byte("workload: {n: 0}\nworkflow:\n- step: start\n  tool: {kind: noop, data: {doubled: '{{ n * 2 }}'}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, path := sqlitetest.Queue(t, `CREATE TABLE jobs (id INTEGER PRIMARY KEY, round INTEGER, payload TEXT, status TEXT DEFAULT 'pending');
		WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 30)
		INSERT INTO jobs (id, round, payload) SELECT i, 1 + (i - 1) / 10, '{"n": ' || i || ', "s": "é\n\"x\""}' FROM s`)
	reg := tools.NewRegistry()
	reg.MustRegister("noop", noop.New())
	reg.MustRegister("mark", tools.ToolFunc(func(ctx context.Context, c *tools.Call) (tools.Output, error) {
		// A failed UPDATE is the row's error outcome, as a tool reports it.
		out := tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"id": c.Config["id"], "big": uint64(18446744073709551615), "f": 1.5}}
		if _, err := db.ExecContext(ctx, `UPDATE jobs SET status = 'done' WHERE id = ?`, c.Config["id"]); err != nil {
			out = tools.Output{Status: tools.StatusError, Error: err.Error()}
		}
		return out, nil
	}))
	var flaky atomic.Int32
	reg.MustRegister("flaky", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		if flaky.Add(1) == 1 {
			return tools.Output{Status: tools.StatusError, Error: "nope <&> \u2028"}, nil
		}
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	cursors := cursor.NewRegistry()
	_ = cursors.Register("sqlite", sqlitedriver.New(sqlitedriver.Config{}))
	defer cursors.Close()
	log := eventlog.NewMemory()
	e, err := New(Config{Log: log, Tools: reg, Cursors: cursors, Keychain: tools.StaticURLs(map[string]string{"q": path})})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reg.MustRegister("playbook", playbook.New(e))
	sources := map[string]string{
		"chain.yaml": `workload: {a: 1, nested: {list: [1, 2.5, "x", null, true]}}
workflow:
- step: start
  tool: {kind: noop, data: {x: '{{ workload.a }}'}}
  set: {ctx.seen: '{{ workload.nested }}'}
  next:
  - step: second
    args: {page: 2, who: arc}
- step: second
  tool:
    kind: flaky
    spec:
      policy:
        rules:
        - when: '{{ output.status == "error" }}'
          then: {do: retry, attempts: 3, delay: 0.01}
  next: [third]
- step: third
  tool: {kind: noop, data: {y: '{{ ctx.seen.list }}'}}
`,
		"drain.yaml": `workflow:
- step: start
  set: {ctx.round: 1}
  tool: {kind: noop}
  next: [drain]
- step: drain
  loop:
    cursor:
      kind: sqlite
      auth: q
      claim: |
        UPDATE jobs SET status = 'claimed'
        WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' AND round = {{ ctx.round }} LIMIT {{ __frame_max_rows }})
        RETURNING id, payload
    iterator: job
    spec: {mode: cursor, max_in_flight: 2, frame: {max_rows: 4}}
  tool: {kind: mark, id: '{{ iter.job.id }}'}
  next:
  - step: bump
    when: '{{ event.name == "loop.done" }}'
- step: bump
  tool: {kind: noop}
  set: {ctx.round: '{{ ctx.round + 1 }}'}
  next:
  - step: drain
    when: '{{ ctx.round <= 3 }}'
`,
		"parent.yaml": `workflow:
- step: start
  loop: {in: '{{ range(4) | list }}', iterator: i, spec: {mode: parallel}}
  tool: {kind: playbook, path: child.yaml, workload: {n: '{{ iter.i }}'}}
`,
	}
	types := []func() any{
		func() any { return new(startedPayload) }, func() any { return new(issuedPayload) },
		func() any { return new(completedPayload) }, func() any { return new(awaitingPayload) },
		func() any { return new(awaitDonePayload) }, func() any { return new(retryPayload) },
		func() any { return new(frameClaimedPayload) }, func() any { return new(frameDonePayload) },
		func() any { return new(frameDoneSummary) }, func() any { return new(stepDonePayload) },
		func() any { return new(loopStartedPayload) }, func() any { return new(finishedPayload) },
		func() any { return new(partialPayload) },
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seen := map[string]bool{}
	for file, src := range sources {
		id, err := e.Start(ctx, []byte(src), StartOptions{File: filepath.Join(dir, file)})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if sum, err := e.Wait(ctx, id); err != nil || sum.Status != StatusCompleted {
			t.Fatalf("%s: Wait = %+v, %v", file, sum, err)
		}
		events, err := log.Read(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			seen[ev.Type] = true
			for _, mk := range types {
				got, want := mk(), mk()
				gotErr := unmarshal(ev.Payload, got)
				wantErr := jsonnum.UnmarshalStream(ev.Payload, want)
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
					t.Errorf("%s %s as %T: got %#v (%v), the Decoder's %#v (%v)", file, ev.Type, got, got, gotErr, want, wantErr)
				}
			}
		}
	}
	for _, typ := range []string{eventlog.TypeExecutionStarted, eventlog.TypeCommandIssued, eventlog.TypeCommandCompleted,
		eventlog.TypeCommandFailed, eventlog.TypeStepCompleted, eventlog.TypeFrameClaimed, eventlog.TypeFrameDone,
		eventlog.TypeLoopStarted, eventlog.TypeLoopDone, eventlog.TypeCommandAwaiting, eventlog.TypeAwaitDone,
		eventlog.TypeRetryScheduled} {
		if !seen[typ] {
			t.Errorf("no %s in the histories: its payloads went unchecked", typ)
		}
	}
}
