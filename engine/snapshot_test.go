package engine_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// snapshotHistories returns histories that cover every kind of event the
// fold reads: the golden replays, a collection loop with retries and a
// failure, and a cursor loop over SQLite. Times are normalised as a
// durable log returns them (UTC, no monotonic reading).
func snapshotHistories(t *testing.T) map[string][]eventlog.Event {
	t.Helper()
	out := map[string][]eventlog.Event{}
	for _, name := range []string{"branches", "sequential"} {
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

	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT DEFAULT 'pending');
		WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 25) INSERT INTO jobs (id) SELECT i FROM s`); err != nil {
		t.Fatal(err)
	}
	cursors := cursor.NewRegistry()
	_ = cursors.Register("sqlite", sqlitedriver.New(sqlitedriver.Config{}))
	defer cursors.Close()
	reg := tools.NewRegistry()
	reg.MustRegister("rec", (&recorder{}).tool())
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Cursors: cursors, Tick: 5 * time.Millisecond,
		Keychain: tools.StaticURLs(map[string]string{"q": path})})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
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
	for _, h := range out {
		for i := range h {
			h[i].Time = h[i].Time.UTC().Round(0)
		}
	}
	return out
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
