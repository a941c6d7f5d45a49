package engine

import (
	"container/heap"
	"time"
)

// The orchestrator decides for an execution when something happened to it
// (a report, a start, a cancel: it is touched), when one of its leases ran
// out, or when one of its retries fell due. The last two are found through
// wakes, a heap of the times executions next need a look, so that a fold
// costs what it touches, not every execution driven here: with thousands
// parked on a sub-playbook or a long backoff, a scan of them all per
// report made each execution's steps slower by milliseconds.
//
// An entry may be early (a heartbeat moved the lease on, the retry ran):
// the execution is then looked at for nothing and scheduled again. It must
// never be late, so whatever can bring a deadline forward schedules the
// execution again: a new lease, a heartbeat, a fold of its events.

// wake is one entry of the heap: execution id needs a look at at.
type wake struct {
	at time.Time
	id string
}

// wakeHeap orders wakes earliest first (container/heap).
type wakeHeap []wake

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h wakeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeHeap) Push(x any)        { *h = append(*h, x.(wake)) }
func (h *wakeHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

// nextWake is the earliest of ex's lease deadlines and retry due times, or
// zero when it has none.
func nextWake(ex *execution) time.Time {
	w := ex.state.NextDue()
	for _, l := range ex.leases {
		if w.IsZero() || l.deadline.Before(w) {
			w = l.deadline
		}
	}
	return w
}

// schedule makes sure ex is looked at by its next wake.
func (o *orchestrator) schedule(ex *execution) {
	o.wakeBy(ex, nextWake(ex))
}

// wakeBy makes sure ex is looked at by at (zero: nothing to wait for). An
// entry at or before at is enough.
func (o *orchestrator) wakeBy(ex *execution, at time.Time) {
	if at.IsZero() || (!ex.wakeAt.IsZero() && !at.Before(ex.wakeAt)) {
		return
	}
	ex.wakeAt = at
	heap.Push(&o.wakes, wake{at: at, id: ex.state.ExecutionID})
	if len(o.wakes) > 2*len(o.execs)+1024 {
		o.compactWakes()
	}
}

// dueWakes takes from the heap the executions whose wake is at or before
// now, each once; they are scheduled again once looked at.
func (o *orchestrator) dueWakes(now time.Time) []string {
	var ids []string
	for len(o.wakes) > 0 && !o.wakes[0].at.After(now) {
		w := heap.Pop(&o.wakes).(wake)
		ex := o.execs[w.id]
		if ex == nil {
			continue // ended or unloaded since
		}
		if !ex.wakeAt.IsZero() && !ex.wakeAt.After(w.at) {
			// Its earliest entry is taken: the next schedule pushes one.
			ex.wakeAt = time.Time{}
		}
		ids = append(ids, w.id)
	}
	return ids
}

// compactWakes drops the entries of executions no longer driven here and
// all but the earliest of each execution's.
func (o *orchestrator) compactWakes() {
	earliest := make(map[string]time.Time, len(o.execs))
	for _, w := range o.wakes {
		if o.execs[w.id] == nil {
			continue
		}
		if at, ok := earliest[w.id]; !ok || w.at.Before(at) {
			earliest[w.id] = w.at
		}
	}
	kept := make(wakeHeap, 0, len(earliest))
	for id, at := range earliest {
		kept = append(kept, wake{at: at, id: id})
		o.execs[id].wakeAt = at
	}
	heap.Init(&kept)
	o.wakes = kept
}
