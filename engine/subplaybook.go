package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cursorflow/cursorflow/tools/playbook"
)

// RunPlaybook implements playbook.Runner: it starts (or, after a retry or a
// resume, re-attaches to) the child execution derived from the calling
// command. A child that has ended gives its outcome, read from the log.
// One that has not: with req.Await the call returns at once with status
// running, and the engine parks the calling command until the child ends;
// without, the call waits for it, and a ctx whose deadline passes (the
// calling step's spec.timeout, which keeps the call from parking) cancels
// the child.
func (e *Engine) RunPlaybook(ctx context.Context, req playbook.Request) (playbook.Result, error) {
	if e.isClosed() {
		return playbook.Result{}, ErrClosed
	}
	childID := ChildExecutionID(req)
	// A log that failed for now (a dropped connection: the append
	// abandoned, the execution being reloaded) is no failure of the call,
	// whose step would fail with it: the child is started or attached to
	// again, as a worker sends a report again, until ctx ends. A start
	// whose append did reach the log is found there and attached to.
	backoff := minReportBackoff
	for attempt := 1; ; attempt++ {
		res, done, err := e.startChild(ctx, req, childID)
		if !errors.Is(err, ErrUnavailable) {
			if err != nil || done {
				return res, err
			}
			break
		}
		e.cfg.Logger.Warn("sub-playbook not started now; starting it again", "execution_id", childID,
			"attempt", attempt, "retry_in", backoff, "error", err)
		t := e.cfg.Clock.NewTimer(backoff)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return playbook.Result{}, fmt.Errorf("sub-playbook %s: %w (last: %w)", req.Path, ctx.Err(), err)
		}
		backoff = min(backoff*2, maxReportBackoff)
	}
	if req.Await {
		return playbook.Result{ExecutionID: childID, Status: playbook.StatusRunning}, nil
	}
	return e.waitChild(ctx, req, childID)
}

// startChild starts the child childID, or attaches to it when the log
// holds it: done with its outcome when it has ended. A log read that
// failed is ErrUnavailable: the next attempt reads again.
func (e *Engine) startChild(ctx context.Context, req playbook.Request, childID string) (res playbook.Result, done bool, err error) {
	// A child that ended here lately (the call runs again once it has)
	// is among the summaries the engine keeps: what a fold of its log
	// would give, without reading and folding the log, playbook and all.
	if sum := e.finishedHere(childID); sum != nil {
		return childResult(childID, sum), true, nil
	}
	existing, err := e.cfg.Log.Read(ctx, childID, 0, 0)
	if err != nil {
		if ctx.Err() != nil {
			return playbook.Result{}, false, err
		}
		return playbook.Result{}, false, fmt.Errorf("sub-playbook %s: %w: read %s: %w", req.Path, ErrUnavailable, childID, err)
	}
	if len(existing) > 0 {
		st, err := foldParsing(childID, existing, e.parse)
		if err != nil {
			return playbook.Result{}, false, fmt.Errorf("sub-playbook %s: %w", req.Path, err)
		}
		if st.Status != StatusRunning {
			return childResult(childID, summarize(st)), true, nil
		}
		if err := e.Resume(ctx, childID); err != nil {
			return playbook.Result{}, false, fmt.Errorf("sub-playbook %s: resume %s: %w", req.Path, childID, err)
		}
		return playbook.Result{}, false, nil
	}
	parentFile := ""
	if events, err := e.cfg.Log.Read(ctx, req.ParentExecutionID, 0, 1); err == nil && len(events) == 1 {
		var p startedPayload
		if decode(events[0], &p) == nil {
			parentFile = p.File
		}
	}
	path := playbook.ChildPath(parentFile, req.Path)
	src, err := os.ReadFile(path)
	if err != nil {
		return playbook.Result{}, false, fmt.Errorf("sub-playbook: %w", err)
	}
	_, err = e.Start(ctx, src, StartOptions{File: path, Workload: req.Workload, ExecutionID: childID, Parent: req.ParentExecutionID})
	if errors.Is(err, ErrExecutionExists) {
		// Another attempt of the calling command started the child
		// since the read above: re-attach to it, as to one found there.
		err = e.Resume(ctx, childID)
		if errors.Is(err, ErrUnknownExecution) {
			// Yet the log holds none of it: this engine is settling a
			// start of it whose append failed (reloading it from the log
			// before it forgets it). Start it again once that is done.
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	if err != nil {
		return playbook.Result{}, false, fmt.Errorf("sub-playbook %s: %w", req.Path, err)
	}
	return playbook.Result{}, false, nil
}

// waitChild waits for the running child childID and gives its outcome.
func (e *Engine) waitChild(ctx context.Context, req playbook.Request, childID string) (playbook.Result, error) {
	sum, err := e.Wait(ctx, childID)
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The calling step's spec.timeout ran out: the child's work is no
		// longer wanted. (A worker that stops cancels ctx instead; then
		// the child goes on, and the re-run call re-attaches to it.)
		if cerr := e.Cancel(context.WithoutCancel(ctx), childID); cerr != nil {
			return playbook.Result{}, fmt.Errorf("sub-playbook %s: no outcome within the step's timeout; cancelling child %s failed: %w", req.Path, childID, cerr)
		}
		return playbook.Result{}, fmt.Errorf("sub-playbook %s: no outcome within the step's timeout; child %s cancelled: %w", req.Path, childID, err)
	}
	if err != nil {
		return playbook.Result{}, err
	}
	return childResult(childID, sum), nil
}

// childResult is the playbook tool's result of a finished child. A
// failure's error names the child and its step, so that the parent's
// failure says where it came from.
func childResult(id string, sum *Summary) playbook.Result {
	msg := sum.Error
	if msg != "" && sum.Step != "" {
		msg = fmt.Sprintf("sub-playbook execution %s failed at step %s: %s", id, sum.Step, msg)
	}
	return playbook.Result{ExecutionID: id, Status: sum.Status, Error: msg, Steps: sum.Results}
}

// ChildExecutionID is the execution id of the child a sub-playbook call
// runs: the parent's id, the calling command's, the calling task's name
// in a pipeline, and the task's attempt from the second on. A resumed
// call re-attaches to its child; a retry, or another task of the
// pipeline, starts one of its own.
func ChildExecutionID(req playbook.Request) string {
	id := req.ParentExecutionID + "/" + req.CommandID
	if req.Task != "" {
		id += "." + req.Task
	}
	if req.Attempt > 1 {
		id += "#try" + strconv.Itoa(req.Attempt)
	}
	return id
}

var _ playbook.Runner = (*Engine)(nil)

// finishedHere returns the summary of execution id if it ended here
// lately (it is among the finished summaries this engine keeps), else nil.
func (e *Engine) finishedHere(id string) *Summary {
	o := e.orch
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.finished.get(id, e.cfg.Clock.Now())
}
