package engine

import (
	"slices"

	"github.com/cursorflow/cursorflow/dsl"
)

// Execution semantics, recorded in execution.started so that a history
// always replays under the rules it was recorded with.
const (
	// Level 0 (histories recorded before levels existed): every arc into
	// a step enters it on its own.
	//
	// semanticsJoin: a step that live work can still reach waits for that
	// work (the join barrier of an inclusive fan-out), and the entries
	// that wait together enter once.
	semanticsJoin = 1
	// semanticsOneStore: workload keys and ctx are one variable store, as
	// NoETL's state.variables: a bare name, ctx.<name> and
	// workload.<name> all read a ctx value set by set: before the
	// workload's (scope.go).
	semanticsOneStore = 2
	// semanticsLoopKey: a cursor loop's driver sees the loop run as
	// "<execution id>/<run id>" (Command.LoopKey), so a default consumer
	// group or durable is the run's own, as the drivers document; before,
	// the run id alone (start#1) gave every execution of a playbook the
	// same one, and a second run found the stream already read.
	semanticsLoopKey = 3
	// semanticsCallDone: as NoETL's events.py, a step's own set: runs
	// only when it succeeded (call.done), and a step that failed (a
	// step.failed that on_error: continue routes past) leaves no result
	// under its name; a failed loop keeps its aggregate. A collection
	// loop leaves its last item issued and that item's index in ctx, as
	// NoETL's variables keep them (decider.keepLastItem); and loop bodies
	// get NoETL's loop variable, loop.index and the rest
	// (Command.LoopVars), which hides a value named loop there.
	semanticsCallDone = 4
	// semanticsStepView: templates see a finished step as NoETL's
	// state.step_results and variables hold it (state.py
	// mark_step_completed, common.py _merge_hydrated_step_result): its
	// data with the result's status (and error, when there is one) laid
	// under status and error where the data has no key of that name; the
	// step's result under ctx.<step> (and workload.<step>) too; and a
	// collection loop as NoETL's aggregate {results, stats: {total,
	// success, failed}} (state.get_loop_aggregation) rather than the list
	// of its items' data, whose stats the loop's result records.
	semanticsStepView = 5
	// semanticsClaimHold: a frame attempt taken and lost (its lease ran
	// out: a worker died, or stalled with its claim open) may hold rows
	// it claimed and never recorded until the source takes them back, a
	// frame lease after the loss (a transaction rolled back, a lease run
	// out). Until then a claim that finds no rows does not drain its
	// slot: the slot claims again once the hold is over (loopState.
	// HoldUntil, Command.Hold). Before, such rows were skipped by the
	// other claims and the drain ended without them.
	semanticsClaimHold = 6
	// semanticsDeliveries: where the source numbers a row's deliveries
	// (a SQL claim returning attempts), a row's failures count toward the
	// loop's own max_attempts stop once per delivery: a delivery run
	// twice because its claim's commit was lost after the record (the
	// source's mark rolled back, the row handed out again under the same
	// number) counts once (loopState.Deliveries). Before, such a poison
	// row stopped the loop one failure early, though the source was about
	// to set it aside.
	semanticsDeliveries = 7
	// semanticsDeliverySet: a row's failures count once per distinct
	// delivery number, whatever order they are reported in. A frame
	// re-run after its claim was rolled back (killed between the record
	// and the commit) reports delivery 1 late, after deliveries 2..n and
	// the source's dead letter; compared with the previous failure's
	// number only, it counted as one more and stopped the loop on a row
	// the source had already set aside, rows still pending never claimed.
	semanticsDeliverySet = 8
	// currentSemantics is what new executions record.
	currentSemantics = semanticsDeliverySet
)

// The join barrier. NoETL gates a step that several branches of an
// inclusive fan-out converge on until every upstream branch ended, then
// runs it once with all their results in scope. Here that is: a wanted
// step waits while any other live work — a run still going, or another
// wanted entry — can reach it through the workflow's arcs (or policy
// jumps) without passing through the step itself. Entries for the same
// step that waited together enter as one run. A branch whose guard was
// false ended (step.skipped) and one never routed to is not live, so
// neither blocks; a loop-back (an arc to a step that already ran) is
// wanted while nothing else can reach it, so it enters at once.

// successors returns the steps a step can hand control to: its arcs and
// every policy jump to a step.
func successors(pb *dsl.Playbook, s *dsl.Step) []string {
	var out []string
	if s.Next != nil {
		for _, a := range s.Next.Arcs {
			out = append(out, a.Step)
		}
	}
	jumps := func(p *dsl.Policy) {
		if p == nil {
			return
		}
		for _, r := range p.Rules {
			if r.Then.Do == dsl.DoJump && pb.Step(r.Then.To) != nil {
				out = append(out, r.Then.To)
			}
		}
	}
	for _, t := range tasksOf(pb, s) {
		jumps(t.Policy)
	}
	jumps(s.Spec.Policy)
	if s.Loop != nil {
		jumps(s.Loop.Policy)
	}
	return out
}

// reaches reports whether from can hand control to to, directly or through
// other steps, without passing through to on the way (to itself excluded
// as an intermediate).
func (s *State) reaches(from, to string) bool {
	key := [2]string{from, to}
	if v, ok := s.reach[key]; ok {
		return v
	}
	if s.reach == nil {
		s.reach = map[[2]string]bool{}
	}
	seen := map[string]bool{from: true}
	queue := []string{from}
	found := false
	for len(queue) > 0 && !found {
		cur := s.Playbook.Step(queue[0])
		queue = queue[1:]
		if cur == nil {
			continue
		}
		for _, n := range successors(s.Playbook, cur) {
			if n == to {
				found = true
				break
			}
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	s.reach[key] = found
	return found
}

// joinWaits reports whether wanted entry w must wait: some live work other
// than w's own step can still reach it. withWanted counts other wanted
// entries as live.
func (s *State) joinWaits(w wantedStep, withWanted bool) bool {
	if s.semantics < semanticsJoin {
		return false
	}
	for _, r := range s.Runs { // any order: the answer is the same
		if r.Status == runRunning && r.Step != w.Step && s.reaches(r.Step, w.Step) {
			return true
		}
	}
	if withWanted {
		for _, o := range s.wanted {
			if o.Step != w.Step && s.reaches(o.Step, w.Step) {
				return true
			}
		}
	}
	return false
}

// joinedWith returns the other wanted entries for w's step, which enter
// together with w, and their args overlaid on w's in order.
func (s *State) joinedWith(w wantedStep) ([]string, map[string]any) {
	if s.semantics < semanticsJoin {
		return nil, w.Args
	}
	var ids []string
	args := w.Args
	for _, o := range s.wanted {
		if o.Step != w.Step || o.Run == w.Run {
			continue
		}
		ids = append(ids, o.Run)
		if len(o.Args) > 0 {
			args = overlay(args, o.Args)
		}
	}
	return ids, args
}

// consumeWanted drops the wanted entries a joined run took with it.
func (s *State) consumeWanted(ids []string) {
	if len(ids) == 0 {
		return
	}
	s.wanted = slices.DeleteFunc(s.wanted, func(w wantedStep) bool { return slices.Contains(ids, w.Run) })
}

// anyRunning reports whether some run is still going.
func (s *State) anyRunning() bool {
	for _, r := range s.Runs {
		if r.Status == runRunning {
			return true
		}
	}
	return false
}
