// Package engine runs playbook executions as an event-sourced
// orchestrator.
//
// # The log is the authority
//
// Everything an execution does is an event in an eventlog.Log. State is a
// pure fold over those events (Fold, State.Apply), and every decision is a
// deterministic function of the state, the current time and the leases
// that ran out (State.Decide). Command ids are derived from the state
// ("fetch#2/s0.f7@1": step run, slot, frame, attempt), so a decision made
// twice — before and after a crash — produces the same command.issued,
// which the log refuses as a duplicate. Any process can therefore rebuild
// an execution from its events and continue it (Engine.Resume).
//
// The events of one execution:
//
//	execution.started   the playbook source, workload and vars
//	command.issued      a unit of work (step, loop item or cursor frame)
//	command.completed   its outcome, reported by a worker
//	command.failed      an unhandled failure, or a request for a retry
//	retry.scheduled     a durable retry with its due time
//	command.awaiting    the command's worker handed it back to wait for a sub-playbook
//	await.done          the awaited execution ended: the command is issued again
//	step.completed      a step's result, ctx assignments and routing, in one event
//	step.failed / step.skipped
//	loop.started        a loop's collection or cursor slots
//	frame.claimed       the rows a frame claimed (and those its claim set aside dead), recorded before its body runs
//	frame.done          the frame's per-row outcomes (key, outcome, duration)
//	loop.done           once per loop, when every slot has drained
//	execution.completed / execution.failed / execution.cancelled
//
// # Orchestrator and workers
//
// The orchestrator (one goroutine per Engine) receives worker reports,
// checks their fencing token (a report for an attempt that is no longer
// current is refused with ErrStale), folds them, decides, appends the
// reports and the decisions in one batch, and only then dispatches the new
// commands. Workers (Worker) render a step's tool configuration, run its
// tools under their policies, claim cursor frames and heartbeat while they
// run. In one process the transport is an in-memory queue; engine/natsjs
// carries commands and reports over NATS JetStream.
//
// # Loops
//
// Collection loops (loop.in) issue one command per item, never more than
// max_in_flight at once (sequential: one). Cursor loops issue one frame
// command per slot; a frame claims up to frame.max_rows rows through a
// cursor.Driver, records them in frame.claimed, and only then commits the
// claim (a transactional source rolls back the claim of a worker that
// died before the record, so no claim exists that the log does not hold);
// it runs the tool chain per row (process: row, at most row_concurrency
// at once) or once per frame (process: frame), acknowledges the rows that
// succeeded, and reports one frame.done. A zero-row claim drains its
// slot; when every slot has drained, loop.done fires exactly once and the
// step routes with event.name == "loop.done".
//
// Where the source's claims are transactional (postgres, mysql, sqlite)
// and the reporter can chain (ChainReporter: in-process workers and
// engine/natsjs), a worker claims its slot's next rows before it reports
// a frame.done and sends them with it: the orchestrator records the
// frame.done, the slot's next command.issued and that frame's
// frame.claimed in one append and hands the command back to the worker,
// which commits the claim and runs it. A slot then pays one append per
// frame, not two. If no next frame is issued (the loop stops, the
// execution is cancelled) or the report is not recorded, the worker rolls
// its claim back: the rows were never on record and never ran.
//
// # Leases and heartbeats
//
// Workers heartbeat every heartbeat_seconds (frames; by default
// lease_seconds/10) or CommandLease/10 (steps and items); templated frame
// seconds are rendered against the execution's scope, and the
// orchestrator's deadlines and the worker's heartbeat use the same
// rendered values (capped by the cursor's reclaim_after). A command that
// has heartbeated is re-issued after Config.MissedHeartbeats (3) silent
// intervals; one that has not (still queued) after its whole lease. The
// re-issue is a new attempt (command id "base@attempt+1", the fencing
// token): the silent worker's late reports are refused. A frame re-issued
// with recorded rows runs exactly those rows. After frame.max_attempts
// expiries (or the cursor's max_attempts) the engine gives up on a frame:
// one last attempt hands its recorded rows to the cursor's dead letter
// and reports them dead; if that attempt is lost too the rows are recorded
// dead without it and listed as abandoned in frame.done.
//
// An attempt counts toward max_attempts (frame.max_attempts for frames,
// DefaultMaxAttempts for steps and items) only if a worker took it: it
// heartbeated or reported anything (a worker heartbeats once as it starts
// a command, in process and over engine/natsjs; a chained frame's worker
// holds its rows and so took it). An attempt whose lease ran out before
// any worker took it — the workers or the transport were down, or every
// worker was busy — is re-issued as often as its lease runs out, without
// counting and with its rows and settle unchanged, so an outage of any
// length dead-letters nothing and the work resumes once a worker is
// back. The re-issue records why (reason "lease" for an attempt taken
// and lost, "lease_untaken" for one nobody took, in command.issued), and
// the fold counts only "lease": the count is a function of the log, and
// logs written before the distinction fold as they always did. Whether an
// attempt was taken is known from the heartbeats this process saw: an
// attempt in flight when the orchestrator restarts is untaken until its
// worker heartbeats again. While the execution is being cancelled an
// expiry gives up as before, taken or not: a cancel stays bounded. So a
// step for a pool no worker serves (spec.pool, a typo too) waits rather
// than fails: the orchestrator warns at each of its re-issues, naming the
// step and the pool, and a cancel ends it.
//
// A frame attempt taken and lost before its claim was on record (its
// worker or process died in between) may have left rows claimed in the
// source. A transactional source rolled that claim back; one with leases
// of its own (redisstream, natsconsumer, s3prefix, clickhouse) holds the
// rows until their lease runs out, so the re-issued frame waits one lease
// before it claims and takes them back (Command.Lost), instead of the
// drain ending without them.
//
// An attempt may also be lost to a worker that stalled rather than died (a
// paused process, a frozen VM) with its claim, or the claim it made ahead
// for the slot's next frame, still open: postgres keeps such rows locked,
// and claims that skip locked rows walk past them, until it ends the
// claim's transaction once it sat idle a frame lease; a source with leases
// holds them until their lease runs out. So, from the loss of a frame
// attempt until a frame lease (and a second) later, a claim that finds no
// rows does not drain its slot: the slot's next frame claims again once
// that time has passed (Command.Hold). The same holds after a resume for
// the frames that were out on workers elsewhere (Config.Dispatcher), which
// outlive the process that drove them. A drain that loses a frame attempt
// near its end finishes up to a lease later than it would have.
//
// # Cancel
//
// Engine.Cancel records cancel.requested; nothing new starts, and every
// worker is told (Dispatcher.Cancel, Worker.Cancel). Frames stop between
// rows and hand their unstarted rows back (or run them, where the source
// cannot take them back); rows still running one lease after the cancel
// are interrupted, so a cancel is bounded; step and item commands are
// interrupted at once. The
// execution ends cancelled once its commands have reported or were given
// up; a frame with recorded rows whose worker vanished gets one attempt
// that only releases them.
//
// A row whose tools fail without a policy deciding is recorded as that
// row's error (and released to the source) while the loop goes on; a
// policy's explicit fail stops the loop and fails the step.
//
// # Policies
//
// Each task's spec.policy rules (or a single-tool step's spec.policy) are
// matched against output, _attempt and the render context: continue,
// retry (none, fixed, linear or exponential backoff), break, jump (to a
// task of the pipeline or to a step) and fail. Retries of steps and loop
// items are scheduled in the log (retry.scheduled) and survive restarts;
// rows of a frame retry inside the frame, which keeps heartbeating.
//
// # Sub-playbooks
//
// A kind: playbook task starts its child execution and frees its worker:
// the command is parked (command.awaiting) until the child's terminal
// event, which the orchestrator answers with await.done in the same
// append and a new attempt of the command; the task runs again and finds
// the child's outcome. A parked command holds no lease and no worker, so
// a loop of many sub-playbooks cannot starve the children of workers.
// Resuming a parent loads the children it waits for. A parent that ends
// cancels the children still running.
//
// # Failures and bounds
//
// Nothing is dispatched, and no lease is released, before the events that
// justify it are stored; the stored results they refer to (Config.Results)
// are written before them. When an append (or that write) fails, every
// execution of the batch is dropped from memory and loaded again from the
// log (with backoff while the log keeps failing); its reporters get
// ErrUnavailable and send again (in-process workers do so themselves). A panic in
// decision code fails its execution, not the process. Shutdown lets
// running commands finish; Close cancels them; either way what is left
// stays in the log for Resume. Config bounds what a long-lived engine
// keeps and what one execution may do: finished summaries (MaxFinished,
// FinishedTTL), result size (MaxResultBytes, measured once the parts over
// the result store's threshold went to the store), collection length
// (MaxLoopItems) and template renders (RenderLimits); finished runs and
// loops are compacted out of the state.
package engine
