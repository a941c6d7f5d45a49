package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// fanoutFlow fans ten items out into three shards and routes on the
// fan-in.
const fanoutFlow = header + `
workload:
  items: [a, b, c, d, e, f, g, h, i, j]
workflow:
  - step: start
    loop:
      in: '{{ items }}'
      iterator: batch
      spec: {loop_mode: fanout, shards: 3}
    tool: {kind: rec, key: 'shard{{ shard.index }}', items: '{{ iter.batch }}', count: '{{ shard.count }}'}
    next:
      - step: report
        when: '{{ event.name == "loop.fanin.completed" and fanin.total_shards == 3 and fanin.done == 3 and fanin.failed == 0 }}'
      - step: wrong
  - step: report
    tool: {kind: rec, key: report, shards: '{{ start | length }}', first: '{{ start[0].items }}'}
  - step: wrong
    tool: {kind: rec, key: wrong}
`

// TestFanoutShards: the collection is split into three shards of
// contiguous items, one command each; the fan-in is recorded once and
// the arcs see it.
func TestFanoutShards(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, fanoutFlow, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || sum.Steps["report"] != "completed" || sum.Steps["wrong"] != "" {
		t.Fatalf("summary %+v", sum)
	}
	if n := logtest.CountType(evs, eventlog.TypeLoopFaninCompleted); n != 1 {
		t.Fatalf("%d loop.fanin.completed", n)
	}
	if n := logtest.CountType(evs, eventlog.TypeLoopDone); n != 0 {
		t.Fatalf("a fan-out loop recorded loop.done")
	}
	var shards []string
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && ev.Step == "start" {
			shards = append(shards, ev.CommandID)
		}
	}
	if strings.Join(shards, ",") != "start#1/shard0@1,start#1/shard1@1,start#1/shard2@1" {
		t.Fatalf("shard commands %v", shards)
	}
	report := data(t, sum, "report")
	if report["shards"] != int64(3) || fmt.Sprint(report["first"]) != "[a b c d]" {
		t.Fatalf("report read %v", report)
	}
	res := sum.Results["start"].(map[string]any)["data"].([]any)
	var got []string
	for _, r := range res {
		m := r.(map[string]any)
		if m["count"] != int64(3) {
			t.Fatalf("shard saw shard.count %v", m["count"])
		}
		got = append(got, fmt.Sprint(m["items"]))
	}
	if strings.Join(got, " ") != "[a b c d] [e f g] [h i j]" {
		t.Fatalf("shards got %v", got)
	}
}

// flaky fails a shard's first `fail` runs (per shard key), or always
// for a shard listed in `broken`.
type flaky struct {
	mu   sync.Mutex
	runs map[string]int
}

func (f *flaky) tool() tools.Tool {
	return fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		key := fmt.Sprint(call.Config["key"])
		f.mu.Lock()
		f.runs[key]++
		n := f.runs[key]
		f.mu.Unlock()
		if fail, _ := call.Config["fail"].(int64); int64(n) <= fail {
			return nil, fmt.Errorf("%s: planned failure %d", key, n)
		}
		if call.Config["broken"] == true {
			return nil, fmt.Errorf("%s is broken", key)
		}
		return map[string]any{"key": key, "n": int64(n)}, nil
	})
}

func runFlaky(t *testing.T, src string) (*engine.Summary, []eventlog.Event, *flaky) {
	t.Helper()
	f := &flaky{runs: map[string]int{}}
	log := eventlog.NewMemory()
	reg := tools.NewRegistry()
	reg.MustRegister("flaky", f.tool())
	reg.MustRegister("rec", (&recorder{}).tool())
	eng, err := engine.New(engine.Config{Log: log, Tools: reg, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	sum, evs := (&bundle{log: log, eng: eng}).run(t, src, nil)
	return sum, evs, f
}

// fanoutRetryFlow fans three parts out: part 1 fails once, part 2 always;
// with two retries each and allow_partial the fan-in routes on the one
// failure.
const fanoutRetryFlow = header + `
workflow:
  - step: start
    loop:
      in: [0, 1, 2]
      iterator: part
      spec: {loop_mode: fanout, shard_size: 1, max_shard_retries: 2, allow_partial: true}
    tool:
      kind: flaky
      key: 'part{{ iter.part[0] }}'
      fail: '{{ 1 if iter.part[0] == 1 else 0 }}'
      broken: '{{ iter.part[0] == 2 }}'
    next:
      - step: compensate
        when: '{{ event.name == "loop.fanin.completed" and fanin.failed == 1 and fanin.done == 2 }}'
  - step: compensate
    tool: {kind: rec, key: compensate, failed: '{{ start | length }}'}
`

// TestFanoutRetriesAndPartial: a shard that fails once is issued again
// (a recorded command) and succeeds; one that keeps failing is issued
// max_shard_retries more times and then counts as failed; with
// allow_partial the step completes and its arcs see fanin.failed.
func TestFanoutRetriesAndPartial(t *testing.T) {
	t.Parallel()
	sum, evs, f := runFlaky(t, fanoutRetryFlow)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || sum.Steps["compensate"] != "completed" {
		t.Fatalf("summary %+v", sum)
	}
	if f.runs["part0"] != 1 || f.runs["part1"] != 2 || f.runs["part2"] != 3 {
		t.Fatalf("runs %v: want part1 twice (one retry), part2 three times (two retries)", f.runs)
	}
	retries := 0
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued && strings.Contains(string(ev.Payload), `"reason":"shard_retry"`) {
			retries++
		}
	}
	if retries != 3 {
		t.Fatalf("%d shard retries recorded, want 3", retries)
	}
	var fanin struct {
		Result struct {
			Status string
			Fanin  struct {
				TotalShards int `json:"total_shards"`
				Done        int
				Failed      int
			}
		}
	}
	for _, ev := range evs {
		if ev.Type == eventlog.TypeLoopFaninCompleted {
			if err := json.Unmarshal(ev.Payload, &fanin); err != nil {
				t.Fatal(err)
			}
		}
	}
	if fanin.Result.Fanin.TotalShards != 3 || fanin.Result.Fanin.Done != 2 || fanin.Result.Fanin.Failed != 1 || fanin.Result.Status != "success" {
		t.Fatalf("fan-in %+v", fanin)
	}
}

// TestFanoutFailedShardFailsStep: without allow_partial a shard that
// failed after its retries fails the step, naming the count; an empty
// collection fans in at once.
func TestFanoutFailedShardFailsStep(t *testing.T) {
	t.Parallel()
	sum, evs, _ := runFlaky(t, header+`
workflow:
  - step: start
    loop:
      in: [0, 1, 2]
      iterator: part
      spec: {loop_mode: fanout, shards: 3}
    tool: {kind: flaky, key: 'p{{ iter.part[0] }}', broken: '{{ iter.part[0] == 0 }}'}
    next: [after]
  - step: after
    tool: {kind: rec, key: after}
`)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusFailed || sum.Step != "start" || sum.Field != "loop" || sum.Error != "1 of 3 shards failed" {
		t.Fatalf("summary %+v", sum)
	}
	if logtest.CountType(evs, eventlog.TypeLoopFaninCompleted) != 1 || sum.Steps["after"] != "" {
		t.Fatalf("want one fan-in and no routing")
	}

	sum, evs, _ = runFlaky(t, header+`
workflow:
  - step: start
    loop:
      in: []
      iterator: part
      spec: {loop_mode: fanout, shards: 4}
    tool: {kind: flaky, key: never}
    next:
      - step: after
        when: '{{ fanin.total_shards == 0 }}'
  - step: after
    tool: {kind: rec, key: after}
`)
	if sum.Status != engine.StatusCompleted || sum.Steps["after"] != "completed" || logtest.CountType(evs, eventlog.TypeCommandIssued) != 1 {
		t.Fatalf("empty fan-out: %+v", sum)
	}
}

// TestFanoutResumeFromEveryCut resumes the fan-out flow from every prefix
// of its history with a fresh engine: it completes, records the fan-in
// once, and never runs again a shard the log says completed.
func TestFanoutResumeFromEveryCut(t *testing.T) {
	t.Parallel()
	resumeFromEveryCut(t, fanoutFlow, func(k int, got *engine.Summary, evs []eventlog.Event) {
		if got.Steps["report"] != "completed" {
			t.Fatalf("cut at %d: %+v", k, got)
		}
		if n := logtest.CountType(evs, eventlog.TypeLoopFaninCompleted); n != 1 {
			t.Fatalf("cut at %d: %d fan-ins", k, n)
		}
	})
}
