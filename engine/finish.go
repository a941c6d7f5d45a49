package engine

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
)

// finishTimeout bounds one driver's Finish (cursor.Finisher): the clean-up
// of a loop run's consumer group must not hold Shutdown or Close for
// long when the source is unreachable.
const finishTimeout = 30 * time.Second

// finisher runs the drivers' Finish calls for loop runs that are over,
// off the orchestrator's goroutine (they are network calls).
type finisher struct {
	worker *Worker
	wg     sync.WaitGroup
	// ctx ends when the engine closes hard (Close): calls in flight are
	// cut short, and their group stays behind.
	ctx    context.Context
	cancel context.CancelFunc
}

func newFinisher(w *Worker) *finisher {
	f := &finisher{worker: w}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

// finish calls the cursor driver's Finish for the loop run cmd (one of
// its frame commands, or one built from the state) stands for, with the
// spec its frames get. The drivers are this engine's Config.Cursors and
// the credential its Keychain resolves: a scale-out orchestrator that was
// given neither finishes nothing (see README, "Consumer groups"). It
// never blocks and never fails the execution: a failed Finish is logged.
func (f *finisher) finish(cmd *Command) {
	if cmd.LoopKey == "" || cmd.Playbook == nil {
		// Before semanticsLoopKey the driver's default group is named from
		// the run id alone and shared by every execution of the playbook.
		return
	}
	step := cmd.Playbook.Step(cmd.Step)
	if step == nil || step.Loop == nil || step.Loop.Cursor == nil {
		return
	}
	lp := step.Loop
	w := f.worker
	driver, err := w.Cursors.Lookup(lp.Cursor.Kind)
	if err != nil {
		// An orchestrator without the kind (its workers run elsewhere).
		w.logger().Debug("cursor loop over; this engine has no driver of its kind to clean up after it",
			"execution_id", cmd.ExecutionID, "loop_id", cmd.LoopKey, "kind", lp.Cursor.Kind)
		return
	}
	fin, ok := driver.(cursor.Finisher)
	if !ok {
		return
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ctx, cancel := context.WithTimeout(f.ctx, finishTimeout)
		defer cancel()
		log := w.logger().With("execution_id", cmd.ExecutionID, "step", cmd.Step, "loop_id", cmd.LoopKey, "cursor", lp.Cursor.Kind)
		scope, fs, err := w.frameScope(ctx, cmd, lp)
		if err != nil {
			log.Warn("cursor loop over; cannot clean up its consumer group", "error", err)
			return
		}
		spec, err := w.cursorSpec(ctx, &Command{ExecutionID: cmd.ExecutionID, Run: cmd.Run, LoopKey: cmd.LoopKey}, lp, fs, scope, driver)
		if err != nil {
			log.Warn("cursor loop over; cannot clean up its consumer group", "error", err)
			return
		}
		spec.WorkerSlotID = 0
		// A drained claim of this process whose record ended the loop
		// commits after that record: it needs what Finish drops.
		w.settling.wait(ctx, cmd)
		if err := fin.Finish(ctx, spec); err != nil {
			log.Warn("cursor loop over; cleaning up its consumer group failed: it stays in the source", "error", err)
		}
	}()
}

// wait waits for the Finish calls in flight; with a done ctx, it cuts them
// short first.
func (f *finisher) wait(ctx context.Context) {
	finished := make(chan struct{})
	go func() { f.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		f.cancel()
		<-finished
	}
	f.cancel()
}

// cursorRunCommand stands for a cursor loop run of s that this process has
// not built a frame command of (it loaded the execution from the log): it
// carries what the run's frames render their cursor block with. Nil when
// run is not a cursor loop's, or when the execution predates
// semanticsLoopKey.
func (s *State) cursorRunCommand(run string) *Command {
	r, l := s.Runs[run], s.Loops[run]
	if r == nil || l == nil || l.Mode != dsl.ModeCursor || s.semantics < semanticsLoopKey || s.Playbook == nil {
		return nil
	}
	return &Command{ExecutionID: s.ExecutionID, Kind: KindFrame, Step: r.Step, Run: run, Playbook: s.Playbook,
		Scope: s.scope(), Args: r.Args, LoopKey: s.ExecutionID + "/" + run}
}

// loadCursorRuns notes the cursor loop runs under way in a state loaded
// from the log, so that their end cleans up after them.
func (o *orchestrator) loadCursorRuns(ex *execution) {
	for run := range ex.state.Loops {
		if cmd := ex.state.cursorRunCommand(run); cmd != nil {
			ex.cursorRuns[run] = cmd
		}
	}
}

// runEnded is called with each event appended to the log: once the event
// that ends a cursor loop run (loop.done, or step.failed for a failed
// loop) is on record, the run will never claim again, and its driver
// may drop what it keeps in the source for it.
func (o *orchestrator) runEnded(ex *execution, ev eventlog.Event) {
	if o.finisher == nil || len(ex.cursorRuns) == 0 {
		return
	}
	if ev.Type != eventlog.TypeLoopDone && ev.Type != eventlog.TypeStepFailed {
		return
	}
	var p stepDonePayload
	if decode(ev, &p) != nil {
		return
	}
	if cmd := ex.cursorRuns[p.Run]; cmd != nil {
		delete(ex.cursorRuns, p.Run)
		o.finisher.finish(cmd)
	}
}

// executionEnded cleans up after the cursor loop runs of an execution that
// ended (its terminal event is on record) while they were under way: an
// ended execution is never resumed, so they never claim again.
func (o *orchestrator) executionEnded(ex *execution) {
	if o.finisher == nil {
		return
	}
	runs := make([]string, 0, len(ex.cursorRuns))
	for run := range ex.cursorRuns {
		runs = append(runs, run)
	}
	sort.Strings(runs)
	for _, run := range runs {
		o.finisher.finish(ex.cursorRuns[run])
		delete(ex.cursorRuns, run)
	}
}

// settlingRuns counts, per loop run (execution and loop key), the drained
// claims of a worker between their frame.done's record and their commit.
// The zero value is ready to use.
type settlingRuns struct {
	mu   sync.Mutex
	runs map[string]*settlingRun
}

// settlingRun is one loop run's count; idle closes when it falls to zero.
type settlingRun struct {
	n    int
	idle chan struct{}
}

func settlingKey(cmd *Command) string { return cmd.ExecutionID + "\x00" + cmd.LoopKey }

// begin counts a drained claim of cmd's loop run until the returned func
// is called. It must be called before the claim's frame.done is reported,
// so that a Finish that the record brings about sees it.
func (s *settlingRuns) begin(cmd *Command) func() {
	key := settlingKey(cmd)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = map[string]*settlingRun{}
	}
	r := s.runs[key]
	if r == nil {
		r = &settlingRun{idle: make(chan struct{})}
		s.runs[key] = r
	}
	r.n++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.n--; r.n == 0 {
			close(r.idle)
			delete(s.runs, key)
		}
	}
}

// waitExecution waits until no drained claim of any loop run of the
// execution is settling, or ctx ends.
func (s *settlingRuns) waitExecution(ctx context.Context, executionID string) {
	prefix := executionID + "\x00"
	var idle []chan struct{}
	s.mu.Lock()
	for key, r := range s.runs {
		if strings.HasPrefix(key, prefix) {
			idle = append(idle, r.idle)
		}
	}
	s.mu.Unlock()
	for _, ch := range idle {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// wait waits until no drained claim of cmd's loop run is settling, or
// ctx ends.
func (s *settlingRuns) wait(ctx context.Context, cmd *Command) {
	s.mu.Lock()
	r := s.runs[settlingKey(cmd)]
	s.mu.Unlock()
	if r == nil {
		return
	}
	select {
	case <-r.idle:
	case <-ctx.Done():
	}
}
