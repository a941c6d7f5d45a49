package engine

import (
	"fmt"
	"strconv"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
)

// Fan-out loops (loop.spec.loop_mode: fanout) split their collection into
// shards: each shard is one durable command whose iterator is the shard's
// list of items, issued again up to max_shard_retries times when it
// fails. The fold counts the shards that ended; once all did, the decision
// records loop.fanin.completed — once per loop, the log's unique rule
// sees to it however many orchestrators decide — and routes the step
// with event.name == "loop.fanin.completed" and fanin.{total_shards,
// done, failed, results}.

// reasonShardRetry marks a failed shard issued again.
const reasonShardRetry = "shard_retry"

// shardCount is how many shards n items make under spec: shards (at most
// one per item), or n / shard_size rounded up, or one per item.
func shardCount(n int, spec dsl.FanoutSpec) int {
	switch {
	case n == 0:
		return 0
	case spec.Shards > 0:
		return min(spec.Shards, n)
	case spec.ShardSize > 0:
		return (n + spec.ShardSize - 1) / spec.ShardSize
	}
	return n
}

// shardRange is shard i's items [from, to) of n items in k shards: the
// items split in order, the first n%k shards one item longer.
func shardRange(n, k, i int) (from, to int) {
	if k <= 0 {
		return 0, 0
	}
	size, extra := n/k, n%k
	from = i*size + min(i, extra)
	to = from + size
	if i < extra {
		to++
	}
	return from, to
}

// shardFailed folds a failed shard: issued again while it has retries
// left, counted as failed otherwise. A failed shard does not stop the
// others.
func (s *State) shardFailed(c *commandState, p *completedPayload, at time.Time) {
	limit := 0
	if st := s.loopStep(c.Run); st != nil {
		limit = st.Loop.Fanout.MaxShardRetries
	}
	if c.ShardRetries < limit {
		s.finishCommand(c, cmdShardRetry)
		return
	}
	s.finishCommand(c, cmdFailed)
	l := s.Loops[c.Run]
	if l == nil || c.Issued.Index >= len(l.Outputs) {
		return
	}
	out := p.Output
	if out == nil {
		out = map[string]any{"status": "error", "error": p.Error}
	}
	l.Outputs[c.Issued.Index] = out
	l.Done++
	l.Failed++
	if s.cancelRequested && p.Error == cancelledError {
		l.Cancelled++
	}
	l.ProgressAt = at
	s.checkLoop(l)
}

// enterFanout fills a fan-out loop's loop.started: its shards and bound.
func enterFanout(lp *loopStartedPayload, lpSpec *dsl.Loop, items, maxInFlight int) {
	lp.Shards = shardCount(items, lpSpec.Fanout)
	lp.MaxInFlight = maxInFlight
	if lp.MaxInFlight <= 0 {
		lp.MaxInFlight = max(1, lp.Shards)
	}
}

// fillShards issues a fan-out loop's shards up to its bound.
func (d *decider) fillShards(run string, r *stepRun, l *loopState) {
	for l.Next-l.Done < l.Max && l.Next < l.Shards {
		base := run + "/shard" + strconv.Itoa(l.Next)
		d.emit(eventlog.Event{Type: eventlog.TypeCommandIssued, Step: r.Step, LoopID: run, CommandID: commandID(base, 1),
			Attempt: 1, Payload: mustJSON(issuedPayload{Kind: KindShard, Run: run, Base: base, Index: l.Next, Args: r.Args})})
	}
}

// finishFanout decides a fan-out loop whose shards all ended: the fan-in.
func (d *decider) finishFanout(step *dsl.Step, run *stepRun, l *loopState) {
	results := make([]any, len(l.Outputs))
	for i, o := range l.Outputs {
		if m, ok := o.(map[string]any); ok {
			results[i] = m["data"]
		}
	}
	msg := ""
	if l.Failed > 0 {
		msg = fmt.Sprintf("%d of %d shards failed", l.Failed, l.Shards)
	}
	failed := msg != "" && !step.Loop.Fanout.AllowPartial
	status := "success"
	if failed {
		status = "error"
	}
	result := map[string]any{"status": status, "error": nil, "data": results, "results": l.Outputs, "count": l.Shards}
	if failed {
		result["error"] = msg
	}
	result = d.storeLarge(run.ID, result, "data", "results")
	// fanin.results is the data list (its reference when it was stored).
	result["fanin"] = map[string]any{"total_shards": l.Shards, "done": l.OK, "failed": l.Failed, "results": result["data"]}
	ev := eventlog.Event{Type: eventlog.TypeLoopFaninCompleted, Step: step.Name, LoopID: run.ID}
	if failed && step.Spec.OnError != "continue" && step.Spec.OnError != "ignore" {
		ev.Payload = mustJSON(stepDonePayload{Run: run.ID, Result: result, Error: msg, Field: "loop"})
		d.emit(ev)
		d.failExecution(step.Name, "loop", msg)
		return
	}
	p, field, err := d.route(step, run, result, eventlog.TypeLoopFaninCompleted)
	if err != nil {
		d.failExecution(step.Name, field, err.Error())
		return
	}
	if failed {
		p.Error, p.Field = msg, "loop"
	}
	ev.Payload = mustJSON(p)
	d.emit(ev)
}
