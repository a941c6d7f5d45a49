package logtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// waitTimeout bounds every wait for something that must happen; it is
// generous so that slow CI machines do not flake.
const waitTimeout = 10 * time.Second

// Run exercises log semantics against logs made by newLog. newLog is called
// once per subtest, from that subtest, and must return an empty log that
// the caller cleans up (t.Cleanup); subtests run in parallel, and a subtest
// may Close its log itself (Close must then be idempotent).
func Run(t *testing.T, newLog func(t *testing.T) eventlog.Log) {
	tests := []struct {
		name string
		fn   func(*testing.T, eventlog.Log)
	}{
		{"RoundTrip", testRoundTrip},
		{"EmptyBatch", testEmptyBatch},
		{"SeqPerExecution", testSeqPerExecution},
		{"ReadAfterLimit", testReadAfterLimit},
		{"BatchAtomicity", testBatchAtomicity},
		{"CancelledAppend", testCancelledAppend},
		{"DuplicateSeparateAppends", testDuplicateSeparate},
		{"DuplicateWithinBatch", testDuplicateWithinBatch},
		{"DuplicateRace", testDuplicateRace},
		{"DuplicateInDrainBatch", testDuplicateInDrainBatch},
		{"DuplicateRaceDrainBatch", testDuplicateRaceDrainBatch},
		{"DuplicateManyCommands", testDuplicateManyCommands},
		{"FaninOnce", testFaninOnce},
		{"NothingAfterTheEnd", testNothingAfterTheEnd},
		{"StartOnce", testStartOnce},
		{"StartRace", testStartRace},
		{"ConcurrentAppends", testConcurrentAppends},
		{"WaitExisting", testWaitExisting},
		{"WaitWakesOnAppend", testWaitWakes},
		{"WaitCancel", testWaitCancel},
		{"WaitIgnoresOtherExecutions", testWaitOtherExecution},
		{"Executions", testExecutions},
		{"Snapshots", testSnapshots},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newLog(t))
		})
	}
}

// CountType returns how many of evs have type typ.
func CountType(evs []eventlog.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// ExecutionID returns a random execution id with a readable prefix, so
// tests sharing one store never collide.
func ExecutionID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func mustAppend(t *testing.T, l eventlog.Log, events ...eventlog.Event) []eventlog.Result {
	t.Helper()
	res, err := l.Append(ctxT(t), events)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if len(res) != len(events) {
		t.Fatalf("Append returned %d results for %d events", len(res), len(events))
	}
	return res
}

func mustRead(t *testing.T, l eventlog.Log, exec string, after int64, limit int) []eventlog.Event {
	t.Helper()
	evs, err := l.Read(ctxT(t), exec, after, limit)
	if err != nil {
		t.Fatalf("Read(%s, %d, %d): %v", exec, after, limit, err)
	}
	return evs
}

func seqs(evs []eventlog.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// JSONEqual compares two JSON documents by value (key order and spacing do
// not matter); two empty documents are equal.
func JSONEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func ev(exec, typ string) eventlog.Event {
	return eventlog.Event{ExecutionID: exec, Type: typ}
}

func issued(exec, cmd string) eventlog.Event {
	return eventlog.Event{ExecutionID: exec, Type: eventlog.TypeCommandIssued, CommandID: cmd, Step: "s"}
}

func loopDone(exec, loop string) eventlog.Event {
	return eventlog.Event{ExecutionID: exec, Type: eventlog.TypeLoopDone, LoopID: loop, Step: "s"}
}

// testRoundTrip: every field comes back as appended, in a batch that
// starts an execution and in one that continues it without
// execution.started (a drain's batch, which a log may store another way).
func testRoundTrip(t *testing.T, l eventlog.Log) {
	for _, started := range []bool{true, false} {
		roundTrip(t, l, started)
	}
}

func roundTrip(t *testing.T, l eventlog.Log, started bool) {
	exec := ExecutionID("roundtrip")
	// Durable stores keep microseconds; a time with that precision must
	// come back Equal.
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.FixedZone("X", 3600))
	in := []eventlog.Event{
		{
			ExecutionID: exec, Type: eventlog.TypeExecutionStarted,
			Payload: json.RawMessage(`{"playbook":"demo","workload":{"n":3,"tags":["a","b"],"nested":{"ok":true,"none":null}}}`),
			Meta:    json.RawMessage(`{"trace_id":"abc","span":7}`),
			Time:    at,
		},
		{
			ExecutionID: exec, Type: eventlog.TypeCommandIssued, Step: "fetch", CommandID: "cmd-1",
			LoopID: "loop-1", Frame: 42, Attempt: 3, WorkerID: "worker-9",
			Payload: json.RawMessage(` { "b" : 2, "a" : "x\u00e9\"y" } `),
			Time:    at.Add(time.Second),
			// ID and Seq are assigned by the log; whatever the caller sets is ignored.
			ID: 999, Seq: 999,
		},
		{ExecutionID: exec, Type: eventlog.TypeStepCompleted, Step: "fetch", Payload: json.RawMessage(`[1,2.5,"three"]`)},
	}
	if !started {
		in = in[1:]
	}
	before := time.Now()
	res := mustAppend(t, l, in...)
	after := time.Now()
	for i, r := range res {
		if r.Duplicate || r.Seq != int64(i+1) || r.ID <= 0 {
			t.Fatalf("result %d = %+v, want Seq %d and a positive ID", i, r, i+1)
		}
		if i > 0 && r.ID <= res[i-1].ID {
			t.Fatalf("IDs not increasing within a batch: %+v", res)
		}
	}
	got := mustRead(t, l, exec, 0, 0)
	if len(got) != len(in) {
		t.Fatalf("Read returned %d events, want %d", len(got), len(in))
	}
	for i, g := range got {
		w := in[i]
		if g.ID != res[i].ID || g.Seq != res[i].Seq {
			t.Errorf("event %d: ID/Seq = %d/%d, want %d/%d", i, g.ID, g.Seq, res[i].ID, res[i].Seq)
		}
		if g.ExecutionID != w.ExecutionID || g.Type != w.Type || g.Step != w.Step || g.CommandID != w.CommandID ||
			g.LoopID != w.LoopID || g.Frame != w.Frame || g.Attempt != w.Attempt || g.WorkerID != w.WorkerID {
			t.Errorf("event %d fields = %+v, want %+v", i, g, w)
		}
		if !JSONEqual(g.Payload, w.Payload) {
			t.Errorf("event %d payload = %s, want %s", i, g.Payload, w.Payload)
		}
		if !JSONEqual(g.Meta, w.Meta) {
			t.Errorf("event %d meta = %s, want %s", i, g.Meta, w.Meta)
		}
		if !w.Time.IsZero() && !g.Time.Equal(w.Time) {
			t.Errorf("event %d time = %v, want %v", i, g.Time, w.Time)
		}
	}
	// A zero Time is set by the log to the append time.
	last := got[len(got)-1]
	if tm := last.Time; tm.Before(before.Add(-time.Millisecond)) || tm.After(after.Add(time.Millisecond)) {
		t.Errorf("zero Time was stored as %v, want between %v and %v", tm, before, after)
	}
	if len(last.Meta) != 0 {
		t.Errorf("empty meta came back as %q", last.Meta)
	}
	// Mutating what Read returned must not change the log.
	if len(got[0].Payload) > 0 {
		got[0].Payload[0] = 'X'
		again := mustRead(t, l, exec, 0, 1)
		if !JSONEqual(again[0].Payload, in[0].Payload) {
			t.Errorf("mutating a read payload changed the log: %s", again[0].Payload)
		}
	}
}

func testEmptyBatch(t *testing.T, l eventlog.Log) {
	res, err := l.Append(ctxT(t), nil)
	if err != nil || len(res) != 0 {
		t.Fatalf("Append(nil) = %v, %v; want no results and no error", res, err)
	}
}

func testSeqPerExecution(t *testing.T, l eventlog.Log) {
	a, b := ExecutionID("seq-a"), ExecutionID("seq-b")
	res := mustAppend(t, l, ev(a, eventlog.TypeExecutionStarted), ev(b, eventlog.TypeExecutionStarted),
		ev(a, eventlog.TypeStepStarted), ev(a, eventlog.TypeStepCompleted), ev(b, eventlog.TypeStepStarted))
	want := []int64{1, 1, 2, 3, 2}
	for i, r := range res {
		if r.Seq != want[i] {
			t.Fatalf("seqs = %+v, want %v", res, want)
		}
	}
	res = mustAppend(t, l, ev(b, eventlog.TypeStepCompleted), ev(a, eventlog.TypeStepStarted))
	if res[0].Seq != 3 || res[1].Seq != 4 {
		t.Fatalf("second append seqs = %+v, want b:3 a:4", res)
	}
	if got := seqs(mustRead(t, l, a, 0, 0)); !slices.Equal(got, seqRange(1, 4)) {
		t.Fatalf("a seqs = %v", got)
	}
	if got := seqs(mustRead(t, l, b, 0, 0)); !slices.Equal(got, seqRange(1, 3)) {
		t.Fatalf("b seqs = %v", got)
	}
}

func testReadAfterLimit(t *testing.T, l eventlog.Log) {
	exec := ExecutionID("read")
	var batch []eventlog.Event
	for i := range 10 {
		e := ev(exec, eventlog.TypeStepCompleted)
		e.Step = fmt.Sprintf("step-%d", i+1)
		batch = append(batch, e)
	}
	mustAppend(t, l, batch...)
	cases := []struct {
		after int64
		limit int
		want  []int64
	}{
		{0, 0, seqRange(1, 10)},
		{3, 4, seqRange(4, 7)},
		{8, 5, seqRange(9, 10)},
		{-5, 2, seqRange(1, 2)},
		{0, -1, seqRange(1, 10)},
		{10, 0, nil},
		{25, 3, nil},
	}
	for _, c := range cases {
		got := mustRead(t, l, exec, c.after, c.limit)
		if !slices.Equal(seqs(got), c.want) {
			t.Errorf("Read(after=%d, limit=%d) seqs = %v, want %v", c.after, c.limit, seqs(got), c.want)
		}
		for _, e := range got {
			if want := fmt.Sprintf("step-%d", e.Seq); e.Step != want {
				t.Errorf("seq %d has step %q, want %q", e.Seq, e.Step, want)
			}
		}
	}
	if got := mustRead(t, l, ExecutionID("unknown"), 0, 0); len(got) != 0 {
		t.Errorf("Read of an unknown execution returned %d events", len(got))
	}
}

func testBatchAtomicity(t *testing.T, l eventlog.Log) {
	exec := ExecutionID("atomic")
	bad := []struct {
		name string
		ev   eventlog.Event
	}{
		{"empty type", eventlog.Event{ExecutionID: exec}},
		{"empty execution", eventlog.Event{Type: eventlog.TypeStepStarted}},
		{"invalid payload", eventlog.Event{ExecutionID: exec, Type: eventlog.TypeStepStarted, Payload: json.RawMessage(`{"a":`)}},
		{"invalid meta", eventlog.Event{ExecutionID: exec, Type: eventlog.TypeStepStarted, Meta: json.RawMessage(`nope`)}},
		{"issued without command id", eventlog.Event{ExecutionID: exec, Type: eventlog.TypeCommandIssued}},
		{"loop.done without loop id", eventlog.Event{ExecutionID: exec, Type: eventlog.TypeLoopDone}},
		{"loop.fanin.completed without loop id", eventlog.Event{ExecutionID: exec, Type: eventlog.TypeLoopFaninCompleted}},
	}
	for _, b := range bad {
		res, err := l.Append(ctxT(t), []eventlog.Event{
			ev(exec, eventlog.TypeExecutionStarted), issued(exec, "c1"), b.ev,
		})
		if !errors.Is(err, eventlog.ErrInvalidEvent) {
			t.Fatalf("%s: Append = %v, %v; want ErrInvalidEvent", b.name, res, err)
		}
	}
	if got := mustRead(t, l, exec, 0, 0); len(got) != 0 {
		t.Fatalf("a rejected batch left %d events behind", len(got))
	}
	// Nothing of the rejected batches was stored: not the seqs, not the
	// command id.
	res := mustAppend(t, l, ev(exec, eventlog.TypeExecutionStarted), issued(exec, "c1"))
	if res[0].Seq != 1 || res[1].Seq != 2 || res[1].Duplicate {
		t.Fatalf("append after rejected batches = %+v, want seqs 1, 2", res)
	}
	if ids, _ := l.Executions(ctxT(t), eventlog.ExecutionsQuery{}); !slices.Equal(ids, []string{exec}) {
		t.Fatalf("Executions = %v, want [%s]", ids, exec)
	}
}

func testCancelledAppend(t *testing.T, l eventlog.Log) {
	exec := ExecutionID("cancelled")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.Append(ctx, []eventlog.Event{ev(exec, eventlog.TypeExecutionStarted)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a cancelled context = %v, want context.Canceled", err)
	}
	if got := mustRead(t, l, exec, 0, 0); len(got) != 0 {
		t.Fatalf("cancelled append stored %d events", len(got))
	}
}

func testDuplicateSeparate(t *testing.T, l eventlog.Log) {
	exec, other := ExecutionID("dup"), ExecutionID("dup-other")
	mustAppend(t, l, ev(exec, eventlog.TypeExecutionStarted))
	if r := mustAppend(t, l, issued(exec, "c1")); r[0].Duplicate || r[0].Seq != 2 {
		t.Fatalf("first command.issued = %+v", r[0])
	}
	if r := mustAppend(t, l, issued(exec, "c1")); r[0] != (eventlog.Result{Duplicate: true}) {
		t.Fatalf("second command.issued = %+v, want a duplicate with zero ID and Seq", r[0])
	}
	if r := mustAppend(t, l, loopDone(exec, "l1")); r[0].Duplicate || r[0].Seq != 3 {
		t.Fatalf("first loop.done = %+v, want seq 3 (the duplicate consumed none)", r[0])
	}
	if r := mustAppend(t, l, loopDone(exec, "l1")); r[0] != (eventlog.Result{Duplicate: true}) {
		t.Fatalf("second loop.done = %+v, want a duplicate", r[0])
	}
	// The rules are scoped: same key elsewhere or under another type is new.
	r := mustAppend(t, l,
		issued(other, "c1"),   // other execution
		loopDone(other, "l1"), // other execution
		eventlog.Event{ExecutionID: exec, Type: eventlog.TypeCommandCompleted, CommandID: "c1"},
		eventlog.Event{ExecutionID: exec, Type: eventlog.TypeCommandCompleted, CommandID: "c1"},
		eventlog.Event{ExecutionID: exec, Type: eventlog.TypeLoopStarted, LoopID: "l1"},
		issued(exec, "l1"),   // a command id equal to a loop id
		loopDone(exec, "c1"), // and vice versa
	)
	want := []int64{1, 2, 4, 5, 6, 7, 8}
	for i, x := range r {
		if x.Duplicate || x.Seq != want[i] {
			t.Fatalf("results = %+v, want seqs %v and no duplicate", r, want)
		}
	}
	if got := seqs(mustRead(t, l, exec, 0, 0)); !slices.Equal(got, seqRange(1, 8)) {
		t.Fatalf("stored seqs = %v", got)
	}
	n := 0
	for _, e := range mustRead(t, l, exec, 0, 0) {
		if e.Type == eventlog.TypeCommandIssued && e.CommandID == "c1" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d command.issued c1 stored, want 1", n)
	}
}

func testDuplicateWithinBatch(t *testing.T, l eventlog.Log) {
	exec := ExecutionID("dup-batch")
	mustAppend(t, l, issued(exec, "c0"))
	res := mustAppend(t, l,
		issued(exec, "c1"),
		issued(exec, "c1"),
		ev(exec, eventlog.TypeStepStarted),
		loopDone(exec, "l1"),
		loopDone(exec, "l1"),
		issued(exec, "c0"), // duplicate of an earlier append
		issued(exec, "c2"),
	)
	want := []eventlog.Result{
		{Seq: 2}, {Duplicate: true}, {Seq: 3}, {Seq: 4}, {Duplicate: true}, {Duplicate: true}, {Seq: 5},
	}
	got := wantResults(t, l, exec, res, want)
	types := []string{eventlog.TypeCommandIssued, eventlog.TypeCommandIssued, eventlog.TypeStepStarted, eventlog.TypeLoopDone, eventlog.TypeCommandIssued}
	for i, e := range got {
		if e.Type != types[i] {
			t.Fatalf("stored types differ at %d: %+v", i, got)
		}
	}
}

// wantResults fails t unless res matches want (a duplicate has zero ID,
// a stored event a positive one) and exec holds seqs 1..5; it returns
// exec's events.
func wantResults(t *testing.T, l eventlog.Log, exec string, res, want []eventlog.Result) []eventlog.Event {
	t.Helper()
	for i := range res {
		if res[i].Duplicate != want[i].Duplicate || res[i].Seq != want[i].Seq ||
			(want[i].Duplicate && res[i].ID != 0) || (!want[i].Duplicate && res[i].ID <= 0) {
			t.Fatalf("result %d = %+v, want %+v (all: %+v)", i, res[i], want[i], res)
		}
	}
	got := mustRead(t, l, exec, 0, 0)
	if !slices.Equal(seqs(got), seqRange(1, 5)) {
		t.Fatalf("stored seqs = %v, want 1..5", seqs(got))
	}
	return got
}

// testNothingAfterTheEnd: once an execution's terminal event is stored,
// nothing more of it is: what follows it in its batch, a later batch of
// any events, and a drain's batch (command.issued and frame events, which
// the PostgreSQL log appends through its lean statement) all come back as
// duplicates. Another execution in the same batch is stored as usual.
// Two orchestrators that drove one execution (a lost lock) would
// otherwise append a late decision after its end.
func testNothingAfterTheEnd(t *testing.T, l eventlog.Log) {
	exec, other := ExecutionID("ended"), ExecutionID("ended-other")
	frame := eventlog.Event{ExecutionID: exec, Type: eventlog.TypeFrameClaimed, Step: "s", LoopID: "l", Frame: 1, Payload: json.RawMessage(`{"rows":[1]}`)}
	res := mustAppend(t, l, ev(exec, eventlog.TypeExecutionStarted), issued(exec, "c1"),
		ev(exec, eventlog.TypeExecutionCompleted), issued(exec, "c2"), ev(other, eventlog.TypeStepStarted))
	if res[2].Seq != 3 || !res[3].Duplicate || res[3].ID != 0 || res[4].Seq != 1 {
		t.Fatalf("results %+v: want the end stored at seq 3, the command after it a duplicate, the other execution at seq 1", res)
	}
	for _, batch := range [][]eventlog.Event{
		{issued(exec, "c3"), frame},
		{ev(exec, eventlog.TypeStepStarted), ev(exec, eventlog.TypeExecutionFailed)},
	} {
		for i, r := range mustAppend(t, l, batch...) {
			if !r.Duplicate || r.ID != 0 {
				t.Fatalf("event %d (%s) after the end: %+v, want a duplicate", i, batch[i].Type, r)
			}
		}
	}
	got := mustRead(t, l, exec, 0, 0)
	if len(got) != 3 || got[2].Type != eventlog.TypeExecutionCompleted {
		t.Fatalf("stored %d events, last %+v: want 3 ending with execution.completed", len(got), got[len(got)-1])
	}
	if r := mustAppend(t, l, ev(other, eventlog.TypeStepCompleted)); r[0].Seq != 2 {
		t.Fatalf("the other execution's next event: %+v, want seq 2", r)
	}
}

// testFaninOnce: loop.fanin.completed is stored once per (execution_id,
// loop_id) — across appends, within a batch and between racing appenders
// — apart from loop.done of the same loop id.
func testFaninOnce(t *testing.T, l eventlog.Log) {
	exec, other := ExecutionID("fanin"), ExecutionID("fanin-other")
	fanin := func(exec, loop string) eventlog.Event {
		return eventlog.Event{ExecutionID: exec, Type: eventlog.TypeLoopFaninCompleted, LoopID: loop, Step: "s"}
	}
	mustAppend(t, l, ev(exec, eventlog.TypeExecutionStarted))
	if r := mustAppend(t, l, fanin(exec, "l1")); r[0].Duplicate || r[0].Seq != 2 {
		t.Fatalf("first loop.fanin.completed = %+v", r[0])
	}
	r := mustAppend(t, l, fanin(exec, "l1"), loopDone(exec, "l1"), fanin(exec, "l2"), fanin(exec, "l2"), fanin(other, "l1"))
	want := []eventlog.Result{{Duplicate: true}, {Seq: 3}, {Seq: 4}, {Duplicate: true}, {Seq: 1}}
	for i := range r {
		if r[i].Duplicate != want[i].Duplicate || r[i].Seq != want[i].Seq {
			t.Fatalf("results %+v, want %+v", r, want)
		}
	}
	const racers = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := 0
	start := make(chan struct{})
	for range racers {
		wg.Go(func() {
			<-start
			res, err := l.Append(ctxT(t), []eventlog.Event{fanin(exec, "race")})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("racing append: %v", err)
				return
			}
			if !res[0].Duplicate {
				stored++
			}
		})
	}
	close(start)
	wg.Wait()
	if stored != 1 {
		t.Fatalf("%d racing loop.fanin.completed stored, want 1", stored)
	}
}

func testDuplicateRace(t *testing.T, l eventlog.Log) {
	const racers, rounds = 16, 4
	exec := ExecutionID("dup-race")
	for round := range rounds {
		batch := []eventlog.Event{issued(exec, fmt.Sprintf("cmd-%d", round)), loopDone(exec, fmt.Sprintf("loop-%d", round))}
		if stored := raceAppend(t, l, racers, batch); stored != [2]int{1, 1} {
			t.Fatalf("round %d: %d command.issued and %d loop.done stored, want exactly one each", round, stored[0], stored[1])
		}
	}
	got := mustRead(t, l, exec, 0, 0)
	if !slices.Equal(seqs(got), seqRange(1, 2*rounds)) {
		t.Fatalf("stored seqs = %v, want 1..%d", seqs(got), 2*rounds)
	}
}

// raceAppend appends batch (two events) from racers goroutines at once
// and returns how many stored each event (did not report it duplicate).
func raceAppend(t *testing.T, l eventlog.Log, racers int, batch []eventlog.Event) (stored [2]int) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		errs  []error
	)
	for range racers {
		wg.Go(func() {
			<-start
			res, err := l.Append(ctxT(t), batch)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for i := range stored {
				if !res[i].Duplicate {
					stored[i]++
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("racing appends failed: %v", errs)
	}
	return stored
}

// testDuplicateInDrainBatch: the batch a cursor drain appends (a frame's
// done, the next command, its claim) resent after a lost reply, with its
// command.issued on record: that one is a duplicate, the rest is stored
// with contiguous seqs. Also an execution's first append without
// execution.started.
func testDuplicateInDrainBatch(t *testing.T, l eventlog.Log) {
	exec := ExecutionID("dup-drain")
	frame := func(typ string) eventlog.Event {
		return eventlog.Event{ExecutionID: exec, Type: typ, Step: "s", LoopID: "l", Frame: 1, Payload: json.RawMessage(`{"rows":[1]}`)}
	}
	if r := mustAppend(t, l, issued(exec, "c1"), frame(eventlog.TypeFrameClaimed)); r[0].Seq != 1 || r[1].Seq != 2 || r[0].Duplicate || r[1].Duplicate {
		t.Fatalf("first append = %+v, want seqs 1, 2", r)
	}
	all, err := l.Executions(ctxT(t), eventlog.ExecutionsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	unfinished, err := l.Executions(ctxT(t), eventlog.ExecutionsQuery{Unfinished: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(all, exec) || slices.Contains(unfinished, exec) {
		t.Fatalf("Executions: all %v, unfinished %v: want %s in all only (its first event is no execution.started)", all, unfinished, exec)
	}
	res := mustAppend(t, l, frame(eventlog.TypeFrameDone), issued(exec, "c1"), issued(exec, "c2"), frame(eventlog.TypeFrameClaimed))
	want := []eventlog.Result{{Seq: 3}, {Duplicate: true}, {Seq: 4}, {Seq: 5}}
	got := wantResults(t, l, exec, res, want)
	types := []string{eventlog.TypeCommandIssued, eventlog.TypeFrameClaimed, eventlog.TypeFrameDone, eventlog.TypeCommandIssued, eventlog.TypeFrameClaimed}
	for i, e := range got {
		if e.Type != types[i] || (i == 3 && e.CommandID != "c2") {
			t.Fatalf("stored event %d = %s %q, want %s (all: %+v)", i, e.Type, e.CommandID, types[i], got)
		}
	}
	if !JSONEqual(got[4].Payload, json.RawMessage(`{"rows":[1]}`)) || got[4].LoopID != "l" || got[4].Frame != 1 {
		t.Fatalf("stored frame.claimed = %+v", got[4])
	}
}

// testDuplicateManyCommands: a batch of many command.issued (a fan-out's)
// with one of them twice and one on record: both are duplicates, the rest
// is stored in order.
func testDuplicateManyCommands(t *testing.T, l eventlog.Log) {
	exec := ExecutionID("dup-many")
	mustAppend(t, l, issued(exec, "c0"))
	var batch []eventlog.Event
	for i := range 24 {
		batch = append(batch, issued(exec, fmt.Sprintf("c%d", i)))
	}
	batch = append(batch, issued(exec, "c5"))
	res := mustAppend(t, l, batch...)
	for i, r := range res {
		dup := i == 0 || i == 24
		if r.Duplicate != dup || (!dup && r.Seq != int64(i+1)) {
			t.Fatalf("result %d = %+v, want duplicate %v, seq %d (all: %+v)", i, r, dup, i+1, res)
		}
	}
	if got := seqs(mustRead(t, l, exec, 0, 0)); !slices.Equal(got, seqRange(1, 24)) {
		t.Fatalf("stored seqs = %v, want 1..24", got)
	}
}

// testDuplicateRaceDrainBatch: racing appends of a command.issued with an
// event that has no rule: one command.issued is stored, every other event
// is, and the seqs stay contiguous.
func testDuplicateRaceDrainBatch(t *testing.T, l eventlog.Log) {
	const racers, rounds = 16, 4
	exec := ExecutionID("dup-race-drain")
	for round := range rounds {
		batch := []eventlog.Event{issued(exec, fmt.Sprintf("cmd-%d", round)), ev(exec, eventlog.TypeStepStarted)}
		if stored := raceAppend(t, l, racers, batch); stored != [2]int{1, racers} {
			t.Fatalf("round %d: %d command.issued and %d step.started stored, want 1 and %d", round, stored[0], stored[1], racers)
		}
	}
	got := mustRead(t, l, exec, 0, 0)
	if !slices.Equal(seqs(got), seqRange(1, rounds*(racers+1))) {
		t.Fatalf("stored seqs = %v, want 1..%d", seqs(got), rounds*(racers+1))
	}
	if n := CountType(got, eventlog.TypeCommandIssued); n != rounds {
		t.Fatalf("%d command.issued stored, want %d", n, rounds)
	}
}

// wantAlreadyStarted fails t unless err is an *eventlog.AlreadyStartedError
// naming exec.
func wantAlreadyStarted(t *testing.T, what string, err error, exec string) {
	t.Helper()
	var se *eventlog.AlreadyStartedError
	if !errors.Is(err, eventlog.ErrAlreadyStarted) || !errors.As(err, &se) || se.ExecutionID != exec {
		t.Fatalf("%s: Append = %v, want an AlreadyStartedError naming %s", what, err, exec)
	}
}

func testStartOnce(t *testing.T, l eventlog.Log) {
	exec, fresh, within, late := ExecutionID("start"), ExecutionID("start-fresh"), ExecutionID("start-within"), ExecutionID("start-late")
	mustAppend(t, l, ev(exec, eventlog.TypeExecutionStarted), issued(exec, "c1"))

	_, err := l.Append(ctxT(t), []eventlog.Event{ev(exec, eventlog.TypeExecutionStarted)})
	wantAlreadyStarted(t, "second start", err, exec)
	// The whole batch is refused: an execution the batch would have
	// started is not stored either.
	_, err = l.Append(ctxT(t), []eventlog.Event{ev(fresh, eventlog.TypeExecutionStarted), ev(exec, eventlog.TypeExecutionStarted), ev(exec, eventlog.TypeStepStarted)})
	wantAlreadyStarted(t, "second start beside a fresh one", err, exec)
	_, err = l.Append(ctxT(t), []eventlog.Event{ev(within, eventlog.TypeExecutionStarted), issued(within, "c1"), ev(within, eventlog.TypeExecutionStarted)})
	wantAlreadyStarted(t, "two starts in one batch", err, within)
	if got := mustRead(t, l, exec, 0, 0); len(got) != 2 {
		t.Fatalf("%s holds %d events after the refused starts, want 2", exec, len(got))
	}
	for _, id := range []string{fresh, within} {
		if got := mustRead(t, l, id, 0, 0); len(got) != 0 {
			t.Fatalf("a refused batch stored %d events of %s", len(got), id)
		}
	}
	// Nothing of the refused batches consumed a seq or a command id.
	if r := mustAppend(t, l, issued(exec, "c2"), ev(within, eventlog.TypeExecutionStarted), issued(within, "c1")); r[0].Seq != 3 || r[1].Seq != 1 || r[2].Seq != 2 || r[2].Duplicate {
		t.Fatalf("append after the refused batches = %+v", r)
	}
	// A start that is not the execution's first event is its one start.
	mustAppend(t, l, ev(late, eventlog.TypeStepStarted))
	mustAppend(t, l, ev(late, eventlog.TypeExecutionStarted))
	_, err = l.Append(ctxT(t), []eventlog.Event{ev(late, eventlog.TypeExecutionStarted)})
	wantAlreadyStarted(t, "second start after a late one", err, late)
}

// testStartRace: of racing batches starting one execution (two processes
// given the same execution id), exactly one is stored.
func testStartRace(t *testing.T, l eventlog.Log) {
	const racers = 16
	exec := ExecutionID("start-race")
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		stored  int
		refused int
		errs    []error
	)
	for i := range racers {
		wg.Go(func() {
			<-start
			_, err := l.Append(ctxT(t), []eventlog.Event{
				ev(exec, eventlog.TypeExecutionStarted), ev(exec, eventlog.TypeStepStarted), issued(exec, fmt.Sprintf("c%d", i)),
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				stored++
			case errors.Is(err, eventlog.ErrAlreadyStarted):
				refused++
			default:
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("racing starts failed: %v", errs)
	}
	if stored != 1 || refused != racers-1 {
		t.Fatalf("%d racing starts stored, %d refused; want 1 and %d", stored, refused, racers-1)
	}
	got := mustRead(t, l, exec, 0, 0)
	if !slices.Equal(seqs(got), seqRange(1, 3)) || CountType(got, eventlog.TypeExecutionStarted) != 1 {
		t.Fatalf("stored %d events (seqs %v), want one start's 3", len(got), seqs(got))
	}
}

func testConcurrentAppends(t *testing.T, l eventlog.Log) {
	const writers, appends = 8, 12
	exec := ExecutionID("concurrent")
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w := range writers {
		wg.Go(func() {
			prev := int64(0)
			for i := range appends {
				n := 1 + (w+i)%3 // batches of 1..3 events
				batch := make([]eventlog.Event, n)
				for j := range batch {
					batch[j] = ev(exec, eventlog.TypeStepCompleted)
					batch[j].Payload = json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d,"j":%d}`, w, i, j))
				}
				res, err := l.Append(ctxT(t), batch)
				if err == nil {
					for j, r := range res {
						// A batch's seqs are contiguous, and later appends of
						// one writer get later seqs.
						if r.Duplicate || r.Seq <= prev || (j > 0 && r.Seq != res[j-1].Seq+1) {
							err = fmt.Errorf("writer %d append %d: results %+v after seq %d", w, i, res, prev)
							break
						}
						prev = r.Seq
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	total := 0
	for w := range writers {
		for i := range appends {
			total += 1 + (w+i)%3
		}
	}
	got := mustRead(t, l, exec, 0, 0)
	if !slices.Equal(seqs(got), seqRange(1, int64(total))) {
		t.Fatalf("stored seqs = %v, want 1..%d", seqs(got), total)
	}
	seen := make(map[string]bool, total)
	for i, e := range got {
		if i > 0 && e.ID <= got[i-1].ID {
			t.Fatalf("IDs do not increase with seq: seq %d id %d after id %d", e.Seq, e.ID, got[i-1].ID)
		}
		var p struct{ W, I, J int }
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatalf("seq %d payload %s: %v", e.Seq, e.Payload, err)
		}
		k := fmt.Sprint(p)
		if seen[k] {
			t.Fatalf("event %s stored twice", k)
		}
		seen[k] = true
	}
}

func testWaitExisting(t *testing.T, l eventlog.Log) {
	exec := ExecutionID("wait-existing")
	mustAppend(t, l, ev(exec, eventlog.TypeExecutionStarted), ev(exec, eventlog.TypeStepStarted))
	for _, after := range []int64{-1, 0, 1} {
		if err := l.Wait(ctxT(t), exec, after); err != nil {
			t.Fatalf("Wait(after=%d) with seq 2 stored = %v", after, err)
		}
	}
}

func testWaitWakes(t *testing.T, l eventlog.Log) {
	exec := ExecutionID("wait-wakes")
	mustAppend(t, l, ev(exec, eventlog.TypeExecutionStarted))
	for round := int64(1); round <= 3; round++ {
		const waiters = 3
		done := make(chan error, waiters)
		for range waiters {
			go func() { done <- l.Wait(ctxT(t), exec, round) }()
		}
		select {
		case err := <-done:
			t.Fatalf("round %d: Wait returned %v before any event after seq %d existed", round, err, round)
		case <-time.After(50 * time.Millisecond):
		}
		appended := make(chan error, 1)
		go func() {
			_, err := l.Append(ctxT(t), []eventlog.Event{ev(exec, eventlog.TypeStepStarted)})
			appended <- err
		}()
		if err := <-appended; err != nil {
			t.Fatal(err)
		}
		for range waiters {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("round %d: Wait = %v, want nil after an append", round, err)
				}
			case <-time.After(waitTimeout):
				t.Fatalf("round %d: Wait did not return within %v of an append", round, waitTimeout)
			}
		}
	}
}

func testWaitCancel(t *testing.T, l eventlog.Log) {
	exec := ExecutionID("wait-cancel")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, exec, 0) }()
	select {
	case err := <-done:
		t.Fatalf("Wait on an empty execution returned %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Wait ignored the cancelled context")
	}
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx, exec, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline = %v, want context.DeadlineExceeded", err)
	}
}

func testWaitOtherExecution(t *testing.T, l eventlog.Log) {
	exec, other := ExecutionID("wait-mine"), ExecutionID("wait-other")
	mustAppend(t, l, ev(exec, eventlog.TypeExecutionStarted))
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctxT(t), exec, 1) }()
	mustAppend(t, l, ev(other, eventlog.TypeStepStarted))
	mustAppend(t, l, ev(exec, eventlog.TypeStepStarted), ev(other, eventlog.TypeStepStarted))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait = %v, want nil once its own execution got seq 2", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Wait did not return")
	}
	// Appends to another execution never satisfy a Wait.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel2()
	go func() { done <- l.Wait(ctx2, exec, 2) }()
	stop := time.After(150 * time.Millisecond)
loop:
	for {
		select {
		case <-stop:
			break loop
		default:
			mustAppend(t, l, ev(other, eventlog.TypeStepStarted))
		}
	}
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while only another execution grew = %v, want context.DeadlineExceeded", err)
	}
}

func testExecutions(t *testing.T, l eventlog.Log) {
	running := ExecutionID("x1-running")
	completed := ExecutionID("x2-completed")
	noStart := ExecutionID("x3-nostart")
	failed := ExecutionID("x4-failed")
	cancelling := ExecutionID("x5-cancelling")
	cancelled := ExecutionID("x6-cancelled")
	later := ExecutionID("x7-later")

	if ids, err := l.Executions(ctxT(t), eventlog.ExecutionsQuery{}); err != nil || len(ids) != 0 {
		t.Fatalf("Executions of an empty log = %v, %v", ids, err)
	}
	mustAppend(t, l, ev(running, eventlog.TypeExecutionStarted))
	mustAppend(t, l, ev(completed, eventlog.TypeExecutionStarted), ev(completed, eventlog.TypeStepStarted))
	mustAppend(t, l, ev(noStart, eventlog.TypeStepStarted), ev(noStart, eventlog.TypeExecutionStarted))
	mustAppend(t, l, ev(failed, eventlog.TypeExecutionStarted), ev(failed, eventlog.TypeExecutionFailed))
	mustAppend(t, l, ev(cancelling, eventlog.TypeExecutionStarted), ev(cancelling, eventlog.TypeCancelRequested))
	mustAppend(t, l, ev(cancelled, eventlog.TypeExecutionStarted))
	mustAppend(t, l, ev(running, eventlog.TypeStepStarted), ev(completed, eventlog.TypeExecutionCompleted),
		ev(cancelled, eventlog.TypeExecutionCancelled), ev(later, eventlog.TypeExecutionStarted))

	all, err := l.Executions(ctxT(t), eventlog.ExecutionsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{running, completed, noStart, failed, cancelling, cancelled, later}; !slices.Equal(all, want) {
		t.Errorf("Executions(false) = %v, want %v", all, want)
	}
	open, err := l.Executions(ctxT(t), eventlog.ExecutionsQuery{Unfinished: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{running, cancelling, later}; !slices.Equal(open, want) {
		t.Errorf("Executions(true) = %v, want %v", open, want)
	}

	// Pages: a listing read Limit ids at a time, each page continuing
	// after the last id of the one before, is the whole listing, in
	// either order; an After the log does not hold lists none.
	for _, q := range []eventlog.ExecutionsQuery{{}, {Unfinished: true}, {NewestFirst: true}, {Unfinished: true, NewestFirst: true}} {
		whole := open
		if !q.Unfinished {
			whole = all
		}
		if q.NewestFirst {
			whole = slices.Clone(whole)
			slices.Reverse(whole)
		}
		for _, limit := range []int{1, 2, 3, len(whole), len(whole) + 1} {
			q := q
			q.Limit = limit
			var got []string
			for range len(whole) + 2 {
				page, err := l.Executions(ctxT(t), q)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > limit {
					t.Fatalf("Executions(%+v) = %d ids, more than the limit", q, len(page))
				}
				got = append(got, page...)
				if len(page) < limit {
					break
				}
				q.After = page[len(page)-1]
			}
			if !slices.Equal(got, whole) {
				t.Errorf("Executions(%+v) in pages = %v, want %v", q, got, whole)
			}
		}
	}
	if ids, err := l.Executions(ctxT(t), eventlog.ExecutionsQuery{After: ExecutionID("no-such")}); err != nil || len(ids) != 0 {
		t.Errorf("Executions after an unknown id = %v, %v: want none", ids, err)
	}
	// After a finished execution, an unfinished listing goes on from
	// where that execution stands.
	if ids, err := l.Executions(ctxT(t), eventlog.ExecutionsQuery{Unfinished: true, After: completed}); err != nil || !slices.Equal(ids, []string{cancelling, later}) {
		t.Errorf("Executions(unfinished, after %s) = %v, %v: want [%s %s]", completed, ids, err, cancelling, later)
	}
}

func testClose(t *testing.T, l eventlog.Log) {
	exec := ExecutionID("close")
	mustAppend(t, l, ev(exec, eventlog.TypeExecutionStarted))
	waiting := make(chan error, 1)
	go func() { waiting <- l.Wait(ctxT(t), exec, 1) }()
	select {
	case err := <-waiting:
		t.Fatalf("Wait returned %v before Close", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-waiting:
		if !errors.Is(err, eventlog.ErrClosed) {
			t.Errorf("Wait interrupted by Close = %v, want ErrClosed", err)
		}
	case <-time.After(waitTimeout):
		t.Error("Close did not interrupt Wait")
	}
	ctx := ctxT(t)
	if _, err := l.Append(ctx, []eventlog.Event{ev(exec, eventlog.TypeStepStarted)}); !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	if _, err := l.Read(ctx, exec, 0, 0); !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
	if err := l.Wait(ctx, exec, 0); !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
	if _, err := l.Executions(ctx, eventlog.ExecutionsQuery{}); !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("Executions after Close = %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

// testSnapshots checks eventlog.Snapshots, which every backend of this
// module implements: a snapshot is replaced only by a further one, one is
// kept per format, and concurrent savers leave the furthest.
func testSnapshots(t *testing.T, l eventlog.Log) {
	sl, ok := l.(eventlog.Snapshots)
	if !ok {
		t.Skipf("%T does not implement eventlog.Snapshots", l)
	}
	ctx := ctxT(t)
	exec := ExecutionID("snap")
	const format, other = "test/1", "test/2"
	load := func(format string) (eventlog.Snapshot, error) { return sl.LoadSnapshot(ctx, exec, format) }
	save := func(format string, seq int64, data string) bool {
		t.Helper()
		saved, err := sl.SaveSnapshot(ctx, eventlog.Snapshot{ExecutionID: exec, Format: format, Seq: seq, Data: []byte(data)})
		if err != nil {
			t.Fatalf("SaveSnapshot(seq %d): %v", seq, err)
		}
		return saved
	}
	if _, err := load(format); !errors.Is(err, eventlog.ErrNoSnapshot) {
		t.Fatalf("LoadSnapshot of an unknown execution = %v, want ErrNoSnapshot", err)
	}
	if !save(format, 5, "five") {
		t.Fatal("the first snapshot was not saved")
	}
	if save(format, 3, "three") || save(format, 5, "five again") {
		t.Fatal("a snapshot replaced one at the same or a further seq")
	}
	got, err := load(format)
	if err != nil || got.Seq != 5 || string(got.Data) != "five" || got.ExecutionID != exec || got.Format != format {
		t.Fatalf("LoadSnapshot = %+v, %v; want seq 5 \"five\"", got, err)
	}
	if !save(format, 9, "nine") {
		t.Fatal("a further snapshot was not saved")
	}
	if got, err := load(format); err != nil || got.Seq != 9 || string(got.Data) != "nine" {
		t.Fatalf("LoadSnapshot = %+v, %v; want seq 9", got, err)
	}
	if _, err := load(other); !errors.Is(err, eventlog.ErrNoSnapshot) {
		t.Fatalf("another format's snapshot = %v, want ErrNoSnapshot", err)
	}
	if !save(other, 1, "other") {
		t.Fatal("a snapshot in another format was not saved")
	}
	if got, err := load(format); err != nil || got.Seq != 9 {
		t.Fatalf("saving another format changed this one: %+v, %v", got, err)
	}
	for _, bad := range []eventlog.Snapshot{
		{Format: format, Seq: 1, Data: []byte("x")},
		{ExecutionID: exec, Seq: 1, Data: []byte("x")},
		{ExecutionID: exec, Format: format, Data: []byte("x")},
	} {
		if _, err := sl.SaveSnapshot(ctx, bad); err == nil {
			t.Errorf("SaveSnapshot(%+v) succeeded", bad)
		}
	}

	// Concurrent savers: the furthest snapshot is the one left.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for seq := int64(10); seq < 30; seq++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sl.SaveSnapshot(ctx, eventlog.Snapshot{ExecutionID: exec, Format: format, Seq: seq, Data: []byte(fmt.Sprint(seq))})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent SaveSnapshot: %v", err)
		}
	}
	if got, err := load(format); err != nil || got.Seq != 29 || string(got.Data) != "29" {
		t.Fatalf("after concurrent saves: %+v, %v; want seq 29", got, err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sl.SaveSnapshot(ctx, eventlog.Snapshot{ExecutionID: exec, Format: format, Seq: 99, Data: []byte("x")}); !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("SaveSnapshot after Close = %v, want ErrClosed", err)
	}
	if _, err := load(format); !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("LoadSnapshot after Close = %v, want ErrClosed", err)
	}
}
