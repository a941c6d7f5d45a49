package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"
	"github.com/cursorflow/cursorflow/tools"
)

// snapshotHistories returns histories that cover every kind of event the
// fold reads: the golden replays (a join among them), a collection loop
// with retries and a failure, a chunked loop, a paginating retry, a
// cursor loop over SQLite, a cursor loop whose frames are settled by the
// engine (dead-lettered after max_attempts, released on cancel), a cursor
// loop whose frame was re-issued while no worker was up, a loop
// step entered again and again (compacted runs and loops), sub-playbooks
// parked and resumed, a fan-out loop with shard retries, and results,
// collections and loop aggregates kept in a result store.
// Times are normalised as a durable log returns them (UTC, no monotonic
// reading).
func snapshotHistories(t *testing.T) map[string][]eventlog.Event {
	t.Helper()
	out := map[string][]eventlog.Event{}
	for _, name := range []string{"branches", "sequential", "join"} {
		raw, err := os.ReadFile("testdata/replay/" + name + ".events.json")
		if err != nil {
			t.Fatal(err)
		}
		var h []eventlog.Event
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		out[name] = h
	}

	b := setup(t, nil)
	sum, h := b.run(t, header+`
workflow:
  - step: start
    loop:
      in: '{{ [1, 2, 3, 4, 5] }}'
      iterator: it
      spec: {mode: parallel, max_in_flight: 2}
    tool:
      kind: rec
      key: 'item{{ iter.it }}'
      fail: '{{ 1 if iter.it == 3 else 0 }}'
      spec:
        policy:
          rules:
            - when: '{{ output.status == "error" }}'
              then: {do: retry, attempts: 3, backoff: fixed, delay: 0.01}
    set: {ctx.looped: true}
    next: [boom]
  - step: boom
    tool: {kind: rec, key: boom, fail: 9}
`, nil)
	if sum.Status != engine.StatusFailed {
		t.Fatalf("the retry history ended %s, want failed", sum.Status)
	}
	out["retries"] = h

	sum, h = b.run(t, header+`
workflow:
  - step: start
    loop: {collection: '{{ [1, 2, 3, 4, 5, 6, 7] }}', element: it, mode: chunked, chunk_size: 3, concurrency: 2}
    tool: {kind: rec, key: 'chunk{{ iter.it }}'}
`, nil)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("the chunked history ended %s: %s", sum.Status, sum.Error)
	}
	out["chunked"] = h

	api := testenv.NewPagedAPI(t, 25, 0)
	sum, h = setupHTTP(t).run(t, header+`
workload: {api: `+api.URL+`}
workflow:`+paginatedStep("start", "append", ""), nil)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("the paging history ended %s: %s", sum.Status, sum.Error)
	}
	out["paging"] = h
	out["settle"] = settleHistory(t)
	// An outage: attempts no worker took, re-issued uncounted, and the
	// worker back.
	ob := newOutageBench(t)
	if sum := ob.runBack(t, ob.outage(t, 2)); sum.Status != engine.StatusCompleted {
		t.Fatalf("the outage history ended %s: %s", sum.Status, sum.Error)
	}
	out["outage"] = ob.events(t)

	// A loop step entered three times: finished runs and loops compacted,
	// the older loops' counts dropped.
	sum, h = b.run(t, strings.Replace(loopBack, "workload: {n: 150}", "workload: {n: 3}", 1), nil)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("the loop-back history ended %s: %s", sum.Status, sum.Error)
	}
	out["loopback"] = h

	// Sub-playbooks: item commands parked (command.awaiting) and resumed
	// (await.done) when their children end.
	dir := t.TempDir()
	writeChild(t, dir, doublingChild)
	subLog := eventlog.NewMemory()
	sub, _ := subEngine(t, subLog, 2)
	sum, h = runPlaybook(t, sub, subLog, parentOfChildren("{{ [1, 2] }}"), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")}, 20*time.Second)
	if sum.Status != engine.StatusCompleted || logtest.CountType(h, eventlog.TypeAwaitDone) != 2 {
		t.Fatalf("the sub-playbook history ended %s with %d await.done: %s", sum.Status, logtest.CountType(h, eventlog.TypeAwaitDone), sum.Error)
	}
	out["subplaybook"] = h

	// A fan-out loop: shards retried, one failed for good, the fan-in.
	sum, h, _ = runFlaky(t, fanoutRetryFlow)
	if sum.Status != engine.StatusCompleted || logtest.CountType(h, eventlog.TypeLoopFaninCompleted) != 1 {
		t.Fatalf("the fan-out history ended %s: %s", sum.Status, sum.Error)
	}
	out["fanout"] = h

	// Results in a result store: a stored step result read by later
	// templates, a stored collection and a stored loop aggregate.
	store, err := resultstoreurl.Open(context.Background(), "mem://", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	storedLog := eventlog.NewMemory()
	stored, err := engine.New(engine.Config{Log: storedLog, Tools: bigTools(), Results: store, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stored.Close() })
	sum, h = (&bundle{log: storedLog, eng: stored}).run(t, strings.Replace(bigFlow, "workload: {n: 3000}", "workload: {n: 70}", 1), nil)
	refs := 0
	for _, ev := range h {
		if strings.Contains(string(ev.Payload), resultstore.MarkerKey) {
			refs++
		}
	}
	if sum.Status != engine.StatusCompleted || refs < 3 {
		t.Fatalf("the stored-results history ended %s (%s) with %d events holding references", sum.Status, sum.Error, refs)
	}
	out["stored"] = h

	_, path := jobsQueue(t, 25)
	reg := tools.NewRegistry()
	reg.MustRegister("rec", (&recorder{}).tool())
	e, log := sqliteEngine(t, path, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor:
        kind: sqlite
        auth: q
        claim: |
          UPDATE jobs SET status = 'claimed'
          WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' LIMIT {{ __frame_max_rows }})
          RETURNING id
      iterator: job
      spec: {mode: cursor, max_in_flight: 2, frame: {max_rows: 4}}
    tool: {kind: rec, key: 'job{{ iter.job.id }}', fail: '{{ 1 if iter.job.id == 7 else 0 }}'}
`), engine.StartOptions{File: "cursor.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := e.Wait(ctx, id); err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("cursor history: %v %+v", err, sum)
	}
	if out["cursor"], err = log.Read(ctx, id, 0, 0); err != nil {
		t.Fatal(err)
	}

	// The same drain with a release statement: row 7 goes back after each
	// failure until the loop stops it (the counts the fold keeps by row).
	_, path = jobsQueue(t, 25)
	e, log = sqliteEngine(t, path, reg)
	id, err = e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor:
        kind: sqlite
        auth: q
        claim: |
          UPDATE jobs SET status = 'claimed'
          WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' LIMIT {{ __frame_max_rows }})
          RETURNING id
        release: UPDATE jobs SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})
      iterator: job
      spec: {mode: cursor, max_in_flight: 2, frame: {max_rows: 4}}
    tool: {kind: rec, key: 'job{{ iter.job.id }}', fail: '{{ 9 if iter.job.id == 7 else 0 }}'}
`), engine.StartOptions{File: "handback.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := e.Wait(ctx, id); err != nil || sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "row 7 failed 4 times") {
		t.Fatalf("hand-back history: %v %+v", err, sum)
	}
	if out["handback"], err = log.Read(ctx, id, 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, h := range out {
		for i := range h {
			h[i].Time = h[i].Time.UTC().Round(0)
		}
	}
	return out
}

// settleHistory plays the worker of a two-slot cursor loop by hand on a
// fake clock: slot 1 runs a frame and drains; slot 0's first frame
// records its claim and then its worker goes silent; the second attempt's
// worker takes it (a heartbeat) and goes silent too, so the engine
// issues an attempt that dead-letters the recorded rows; slot 0's second
// frame records its claim, the execution is cancelled and that worker
// goes silent too, so the engine issues an attempt that releases them.
func settleHistory(t *testing.T) []eventlog.Event {
	t.Helper()
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	d := &holdingDispatcher{}
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Dispatcher: d, Clock: clk, Tick: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      cursor: {kind: postgres, auth: pg, claim: "SELECT 1", max_attempts: 2, dead_letter: "SELECT 1"}
      iterator: r
      spec: {max_in_flight: 2, frame: {lease_seconds: 10}}
    tool: {kind: noop}
`), engine.StartOptions{File: "settle.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	settle := settler(ctx, t, e)
	// command returns the issued command with id.
	command := func(cid string) *engine.Command {
		settle()
		for _, c := range d.issued() {
			if c.ID == cid {
				return c
			}
		}
		t.Fatalf("command %s was not issued; issued: %d commands", cid, len(d.issued()))
		return nil
	}
	report := func(c *engine.Command, typ, payload string) {
		t.Helper()
		ev := eventlog.Event{ExecutionID: id, Type: typ, Step: c.Step, CommandID: c.ID, Attempt: c.Attempt,
			LoopID: c.Run, Frame: c.Frame, Payload: []byte(payload)}
		if err := e.Reporter().Report(ctx, ev); err != nil {
			t.Fatalf("report %s of %s: %v", typ, c.ID, err)
		}
	}
	const lapse = 11 * time.Second // past the 10 s lease
	s1 := command("start#1/s1.f1@1")
	report(s1, eventlog.TypeFrameClaimed, `{"rows":[{"key":"3","values":{"id":3}}]}`)
	report(s1, eventlog.TypeFrameDone, `{"items":[{"key":"3","outcome":"ok"}],"counts":{"rows":1,"ok":1}}`)
	report(command("start#1/s1.f2@1"), eventlog.TypeFrameDone, `{"drained":true,"counts":{}}`)

	report(command("start#1/s0.f1@1"), eventlog.TypeFrameClaimed, `{"rows":[{"key":"1","values":{"id":1}},{"key":"2","values":{"id":2}}]}`)
	clk.Advance(lapse)
	if err := e.Reporter().Heartbeat(ctx, id, command("start#1/s0.f1@2").ID); err != nil {
		t.Fatal(err)
	}
	settle()
	clk.Advance(lapse)
	dl := command("start#1/s0.f1@3")
	if dl.Settle != engine.SettleDeadLetter || len(dl.Rows) != 2 {
		t.Fatalf("third attempt of frame 1: settle %q with %d rows, want a dead letter of 2", dl.Settle, len(dl.Rows))
	}
	report(dl, eventlog.TypeFrameDone, `{"items":[{"key":"1","outcome":"dead"},{"key":"2","outcome":"dead"}],"counts":{"rows":2,"dead":2}}`)

	report(command("start#1/s0.f2@1"), eventlog.TypeFrameClaimed, `{"rows":[{"key":"4","values":{"id":4}}]}`)
	if err := e.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	settle()
	clk.Advance(lapse)
	rel := command("start#1/s0.f2@2")
	if rel.Settle != engine.SettleRelease || len(rel.Rows) != 1 {
		t.Fatalf("re-issue of frame 2 under cancel: settle %q with %d rows, want a release of 1", rel.Settle, len(rel.Rows))
	}
	report(rel, eventlog.TypeFrameDone, `{"released":1,"cancelled":true,"counts":{}}`)
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCancelled {
		t.Fatalf("settle history: %v %+v, want cancelled", err, sum)
	}
	h, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// comparable clears what a restored State legitimately holds elsewhere:
// the parsed playbook (parsed again, a new pointer).
func comparable(s *engine.State) engine.State {
	c := *s
	c.Playbook = nil
	return c
}

// TestSnapshotRestoresTheFold cuts each history at every event: the
// state folded up to the cut, encoded and restored, equals the fold in
// every field (unexported ones included, so a field added to State but
// forgotten by the snapshot fails here), decides the same, and with the
// rest of the history applied ends equal to the fold of the whole.
func TestSnapshotRestoresTheFold(t *testing.T) {
	t.Parallel()
	for name, h := range snapshotHistories(t) {
		t.Run(name, func(t *testing.T) {
			id := h[0].ExecutionID
			full, err := engine.Fold(id, h)
			if err != nil {
				t.Fatal(err)
			}
			later := h[len(h)-1].Time.Add(time.Hour)
			for k := 0; k <= len(h); k++ {
				folded, err := engine.Fold(id, h[:k])
				if err != nil {
					t.Fatal(err)
				}
				data, err := folded.MarshalSnapshot()
				if err != nil {
					t.Fatalf("cut at %d: %v", k, err)
				}
				restored, err := engine.UnmarshalState(data)
				if err != nil {
					t.Fatalf("cut at %d: %v", k, err)
				}
				if (restored.Playbook == nil) != (folded.Playbook == nil) {
					t.Fatalf("cut at %d: playbook restored %v, folded %v", k, restored.Playbook != nil, folded.Playbook != nil)
				}
				if diff := stateDiff(comparable(restored), comparable(folded)); diff != "" {
					t.Fatalf("cut at %d: restored state differs from the fold: %s", k, diff)
				}
				if k > 0 {
					if d1, d2 := restored.Decide(later, nil, ""), folded.Decide(later, nil, ""); !reflect.DeepEqual(d1, d2) {
						t.Fatalf("cut at %d: decisions differ:\n%v\n%v", k, d1, d2)
					}
				}
				// Decide may have changed both; start again from the bytes.
				restored, _ = engine.UnmarshalState(data)
				for _, ev := range h[k:] {
					if err := restored.Apply(ev); err != nil {
						t.Fatalf("cut at %d: apply %d: %v", k, ev.Seq, err)
					}
				}
				if got, want := restored.Snapshot(), full.Snapshot(); !reflect.DeepEqual(got, want) {
					t.Fatalf("cut at %d: status after the rest differs:\n%+v\n%+v", k, got, want)
				}
				if diff := stateDiff(comparable(restored), comparable(full)); diff != "" {
					t.Fatalf("cut at %d: state after the rest differs: %s", k, diff)
				}
			}
		})
	}
}

// stateDiff names the fields of State in which a and b differ, with both
// values, or returns "".
func stateDiff(a, b engine.State) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var diff string
	for i := 0; i < va.NumField(); i++ {
		fa, fb := va.Field(i), vb.Field(i)
		if !reflect.DeepEqual(reflect.NewAt(fa.Type(), unsafePointer(&a, i)).Elem().Interface(),
			reflect.NewAt(fb.Type(), unsafePointer(&b, i)).Elem().Interface()) {
			diff += fmt.Sprintf("\n%s: %#v\n%s  vs %#v", va.Type().Field(i).Name,
				reflect.NewAt(fa.Type(), unsafePointer(&a, i)).Elem().Interface(), "",
				reflect.NewAt(fb.Type(), unsafePointer(&b, i)).Elem().Interface())
		}
	}
	return diff
}

func unsafePointer(s *engine.State, field int) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(s), reflect.TypeOf(*s).Field(field).Offset)
}

func TestUnmarshalStateRejectsGarbage(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "{", "[]", `{"ExecutionID": ""}`, `{"ExecutionID": "x", "Status": "running", "Started": {"playbook": "not: [a playbook"}}`} {
		if _, err := engine.UnmarshalState([]byte(in)); err == nil {
			t.Errorf("UnmarshalState(%q) succeeded", in)
		}
	}
}
