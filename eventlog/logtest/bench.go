package logtest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// frameRows is the number of rows of a benchmarked frame: the engine's
// default max_rows.
const frameRows = 100

// Bench measures append throughput of logs made by newLog with the events
// a cursor loop writes, shaped as the engine writes them (see
// examples/bench for the engine's own drain):
//
//   - frame: one frame's two appends, as the orchestrator makes them: its
//     frame.claimed with the 100 claimed rows, then its frame.done with
//     the 100 rows' outcomes together with the command.issued of the
//     slot's next frame (whose uniqueness the log checks). One op is one
//     frame, 3 events.
//   - frame-chained: one frame as a worker that chains frames writes it
//     (engine.ChainReporter): one append holding the frame.done, the
//     command.issued of the slot's next frame and that frame's
//     frame.claimed with its 100 rows. One op is one frame, 3 events.
//   - frame-group8: the same for 8 slots whose reports the orchestrator
//     folds into one append each: 8 frame.claimed, then 8 frame.done and
//     8 command.issued. One op is 8 frames, 24 events.
//   - frame-exec8: 8 executions appending frames at once, each as in
//     frame (executions on one orchestrator, or orchestrators sharing a
//     log). One op is one frame, 3 events.
//   - step: a step's command.issued, then its command.completed with
//     step.completed. One op is one step, 3 events.
//   - issued-duplicate: a command.issued the log already holds (a
//     re-sent report): the duplicate check that finds it, no event
//     stored. One op is one append.
//   - single: one small step.completed per append: the round-trip floor.
//
// Each reports events/s next to ns/op (except issued-duplicate, which
// stores none).
func Bench(b *testing.B, newLog func(b *testing.B) eventlog.Log) {
	BenchServer(b, newLog, nil)
}

// BenchServer is Bench for a log whose database server's CPU time
// serverCPU reads (pgcpu for a local PostgreSQL; false: not measured):
// each benchmark also reports that server's CPU per op as server-µs/op,
// whatever else the server did meanwhile included.
func BenchServer(b *testing.B, newLog func(b *testing.B) eventlog.Log, serverCPU func() (time.Duration, bool)) {
	// start is called just before a benchmark's loop; the func it returns,
	// after it, reports events/s (when events > 0) and server-µs/op.
	start := func(b *testing.B) func(events int64) {
		var cpu0 time.Duration
		ok0 := false
		if serverCPU != nil {
			cpu0, ok0 = serverCPU()
		}
		return func(events int64) {
			if events > 0 {
				b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			}
			if ok0 {
				if cpu1, ok := serverCPU(); ok {
					b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "server-µs/op")
				}
			}
		}
	}
	// frameRuns runs cycle, which appends one frame of every one of slots
	// slots (3 events each), once per op.
	frameRuns := func(name, exec string, slots int, cycle func(*frames, *testing.B, eventlog.Log) bool) {
		b.Run(name, func(b *testing.B) {
			l := newLog(b)
			f := newFrames(ExecutionID(exec), slots)
			report := start(b)
			for b.Loop() {
				if !cycle(f, b, l) {
					b.FailNow()
				}
			}
			report(3 * int64(slots) * int64(b.N))
		})
	}
	frameRuns("frame", "bench-frame", 1, (*frames).cycle)
	frameRuns("frame-chained", "bench-chained", 1, (*frames).chainedCycle)
	frameRuns("frame-group8", "bench-group", 8, (*frames).cycle)
	b.Run("frame-exec8", func(b *testing.B) {
		l := newLog(b)
		const execs = 8
		var next atomic.Int64
		var wg sync.WaitGroup
		report := start(b)
		b.ResetTimer()
		for i := range execs {
			f := newFrames(ExecutionID(fmt.Sprintf("bench-exec%d", i)), 1)
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					if !f.cycle(b, l) {
						return
					}
				}
			})
		}
		wg.Wait()
		report(3 * int64(b.N))
	})
	b.Run("step", func(b *testing.B) {
		l := newLog(b)
		exec := ExecutionID("bench-step")
		result := json.RawMessage(`{"status":"success","data":{"rows":3,"duration_ms":12}}`)
		i := 0
		report := start(b)
		for b.Loop() {
			i++
			step := "step" + strconv.Itoa(i)
			cmd := step + "@1"
			if !appendOK(b, l, []eventlog.Event{{ExecutionID: exec, Type: eventlog.TypeCommandIssued, Step: step, CommandID: cmd, Attempt: 1,
				Payload: json.RawMessage(`{"kind":"step"}`)}}) {
				b.FailNow()
			}
			if !appendOK(b, l, []eventlog.Event{
				{ExecutionID: exec, Type: eventlog.TypeCommandCompleted, Step: step, CommandID: cmd, Attempt: 1, WorkerID: "w-bench", Payload: result},
				{ExecutionID: exec, Type: eventlog.TypeStepCompleted, Step: step, Payload: result},
			}) {
				b.FailNow()
			}
		}
		report(3 * int64(b.N))
	})
	b.Run("issued-duplicate", func(b *testing.B) {
		l := newLog(b)
		ev := eventlog.Event{ExecutionID: ExecutionID("bench-dup"), Type: eventlog.TypeCommandIssued, Step: "start",
			CommandID: "start#1/s0.f1@1", LoopID: "start#1", Frame: 1, Attempt: 1, Payload: json.RawMessage(`{"kind":"frame"}`)}
		if !appendOK(b, l, []eventlog.Event{ev}) {
			b.FailNow()
		}
		report := start(b)
		for b.Loop() {
			res, err := l.Append(b.Context(), []eventlog.Event{ev})
			if err != nil {
				b.Fatal(err)
			}
			if !res[0].Duplicate {
				b.Fatal("a command.issued appended twice was stored twice")
			}
		}
		report(0)
	})
	b.Run("single", func(b *testing.B) {
		l := newLog(b)
		batch := []eventlog.Event{{ExecutionID: ExecutionID("bench-single"), Type: eventlog.TypeStepCompleted, Step: "step",
			Payload: json.RawMessage(`{"status":"success","data":{"rows":3,"duration_ms":12}}`)}}
		report := start(b)
		for b.Loop() {
			if !appendOK(b, l, batch) {
				b.FailNow()
			}
		}
		report(int64(b.N))
	})
}

// appendOK appends batch and fails b unless every event was stored.
func appendOK(b *testing.B, l eventlog.Log, batch []eventlog.Event) bool {
	res, err := l.Append(b.Context(), batch)
	if err != nil {
		b.Error(err)
		return false
	}
	for i, r := range res {
		if r.Duplicate || r.Seq == 0 {
			b.Errorf("event %d (%s %s) not stored: %+v", i, batch[i].Type, batch[i].CommandID, r)
			return false
		}
	}
	return true
}

// frames writes the frames of one cursor loop with slots slots: payloads
// are made once (the log's cost is measured, not JSON encoding), command
// ids are new each frame, so every command.issued passes the log's
// duplicate check.
type frames struct {
	exec, run     string
	slots         int
	frame         int
	claimed, done json.RawMessage
	claimB, doneB []eventlog.Event
}

func newFrames(exec string, slots int) *frames {
	var c, d strings.Builder
	c.WriteString(`{"rows":[`)
	d.WriteString(`{"claim_open_us":8077,"counts":{"dead":0,"failed":0,"ok":100,"rows":100},"items":[`)
	for i := 1; i <= frameRows; i++ {
		if i > 1 {
			c.WriteByte(',')
			d.WriteByte(',')
		}
		fmt.Fprintf(&c, `{"attempt":1,"key":"%d","values":{"id":%d,"payload":"payload-%d"}}`, i, i, i)
		fmt.Fprintf(&d, `{"key":"%d","ms":35,"outcome":"ok"}`, i)
	}
	c.WriteString(`]}`)
	d.WriteString(`],"ms":36}`)
	return &frames{exec: exec, run: "start#1", slots: slots, claimed: json.RawMessage(c.String()), done: json.RawMessage(d.String()),
		claimB: make([]eventlog.Event, slots), doneB: make([]eventlog.Event, 2*slots)}
}

func (f *frames) commandID(slot, frame int) string {
	return f.run + "/s" + strconv.Itoa(slot) + ".f" + strconv.Itoa(frame) + "@1"
}

// chainedCycle appends, for every slot, its frame's outcome, the next
// frame's command and that frame's claim, all in one append.
func (f *frames) chainedCycle(b *testing.B, l eventlog.Log) bool {
	f.frame++
	batch := make([]eventlog.Event, 0, 3*f.slots)
	for s := range f.slots {
		id, next := f.commandID(s, f.frame), f.commandID(s, f.frame+1)
		batch = append(batch,
			eventlog.Event{ExecutionID: f.exec, Type: eventlog.TypeFrameDone, Step: "start", CommandID: id, LoopID: f.run,
				Frame: f.frame, Attempt: 1, WorkerID: "w-bench", Payload: f.done},
			eventlog.Event{ExecutionID: f.exec, Type: eventlog.TypeCommandIssued, Step: "start", CommandID: next, LoopID: f.run,
				Frame: f.frame + 1, Attempt: 1, Payload: f.issued(s, next)},
			eventlog.Event{ExecutionID: f.exec, Type: eventlog.TypeFrameClaimed, Step: "start", CommandID: next, LoopID: f.run,
				Frame: f.frame + 1, Attempt: 1, WorkerID: "w-bench", Payload: f.claimed})
	}
	return appendOK(b, l, batch)
}

// issued is the command.issued payload of slot s's frame command id.
func (f *frames) issued(s int, id string) json.RawMessage {
	return json.RawMessage(`{"kind":"frame","run":"` + f.run + `","base":"` + strings.TrimSuffix(id, "@1") + `","slot":` + strconv.Itoa(s) + `}`)
}

// cycle appends one frame of every slot: the claims, then the outcomes
// with the next frames' commands. It reports whether both appends stored
// every event.
func (f *frames) cycle(b *testing.B, l eventlog.Log) bool {
	f.frame++
	for s := range f.slots {
		id := f.commandID(s, f.frame)
		f.claimB[s] = eventlog.Event{ExecutionID: f.exec, Type: eventlog.TypeFrameClaimed, Step: "start", CommandID: id, LoopID: f.run,
			Frame: f.frame, Attempt: 1, WorkerID: "w-bench", Payload: f.claimed}
		f.doneB[2*s] = eventlog.Event{ExecutionID: f.exec, Type: eventlog.TypeFrameDone, Step: "start", CommandID: id, LoopID: f.run,
			Frame: f.frame, Attempt: 1, WorkerID: "w-bench", Payload: f.done}
		next := f.commandID(s, f.frame+1)
		f.doneB[2*s+1] = eventlog.Event{ExecutionID: f.exec, Type: eventlog.TypeCommandIssued, Step: "start", CommandID: next, LoopID: f.run,
			Frame: f.frame + 1, Attempt: 1, Payload: f.issued(s, next)}
	}
	return appendOK(b, l, f.claimB) && appendOK(b, l, f.doneB)
}
