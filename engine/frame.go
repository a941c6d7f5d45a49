package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/faultpoint"
)

// settleTimeout bounds the source calls a frame makes after its context
// may have ended (commit, abort, ack, release): they must not hang, and
// they must not be skipped because the frame was cancelled.
const settleTimeout = 30 * time.Second

// errCancelGrace interrupts the rows of a cancelled frame that are still
// running one lease after the cancel.
var errCancelGrace = errors.New("execution cancelled: rows still running a lease after the cancel were interrupted")

// runFrame runs a frame command: it claims a frame (or takes the rows an
// earlier attempt recorded), records the claim, commits it, runs the
// chain on the rows and reports frame.done. A frame re-issued to settle
// its rows (Command.Settle) dead-letters or releases them instead.
//
// Where the reporter can chain (ChainReporter) and the source's claims are
// transactional, the slot's next rows are claimed before the frame.done
// goes out and recorded with it: the frame the orchestrator issues for the
// slot comes back with the report's answer and runs here, on the same
// cursor, with its claim already on record.
func (w *Worker) runFrame(ctx context.Context, cmd *Command, step *dsl.Step, rep Reporter, cancelled <-chan struct{}) error {
	var cur cursor.Cursor // opened by the first frame, kept by the frames chained to it
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	var held *heldClaim
	limit := w.MaxChain
	if limit == 0 {
		limit = DefaultMaxChain
	}
	for chained := 0; ; chained++ {
		mayChain := (limit < 0 || chained < limit) && !w.draining.Load()
		next, err := w.frame(ctx, cmd, step, rep, cancelled, &cur, held, mayChain)
		if err != nil || next == nil {
			return err
		}
		if next.cmd.Playbook == nil {
			// A remote worker's chained command comes without the parsed
			// playbook: it is the execution's, which this frame ran.
			next.cmd.Playbook = cmd.Playbook
		}
		cmd, held = next.cmd, next.held
	}
}

// DefaultMaxChain is Worker.MaxChain's default: a slot chains at most 16
// frames in a row on one worker before its next frame is dispatched again.
const DefaultMaxChain = 16

// heldClaim is a claim made ahead by the frame before, already recorded
// under the command it is handed to, not committed yet.
type heldClaim struct {
	claim *cursor.Claim
	rows  []FrameRow
	at    time.Time
}

// chainedFrame is the next frame of a slot, handed back with the report of
// the frame before, and the claim it runs.
type chainedFrame struct {
	cmd  *Command
	held *heldClaim
}

// frame runs one frame command (see runFrame). *curp is the cursor, opened
// here if nil; held is the frame's claim when it was made ahead. It returns
// the slot's next frame when its claim was recorded with this frame's
// outcome.
func (w *Worker) frame(ctx context.Context, cmd *Command, step *dsl.Step, rep Reporter, cancelled <-chan struct{}, curp *cursor.Cursor, held *heldClaim, mayChain bool) (*chainedFrame, error) {
	start := time.Now()
	if held != nil {
		// Whatever ends the frame, a claim made ahead that it did not
		// commit goes back (Abort after Commit does nothing).
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
			defer cancel()
			_ = held.claim.Abort(sctx)
		}()
	}
	// The lease runs from dispatch: heartbeat through opening the cursor
	// and the claim too, which can be slow on a loaded source. The first
	// beat goes at once: it says a worker took the attempt (see
	// Worker.heartbeat); a chained frame's rows say so already.
	stop := w.heartbeat(ctx, cmd, rep, held == nil)
	defer stop()
	lp := step.Loop
	exclusive := false // the source's claims exclude each other (set once the driver is known)
	done := func(p frameDonePayload) error {
		p.Ms = time.Since(start).Milliseconds()
		p.Exclusive = exclusive
		// The frame's outcome goes out even when its context ended (a
		// shutdown cut it short): the source has settled its rows (acked,
		// handed back), and the log must say so, or a resume runs them
		// again.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		return w.report(rctx, rep, cmd, eventlog.TypeFrameDone, p)
	}
	fail := func(msg string) error { return done(frameDonePayload{Fail: msg}) }
	scope, fs, err := w.frameScope(ctx, cmd, lp)
	if err != nil {
		return nil, fail(err.Error())
	}
	driver, err := w.Cursors.Lookup(lp.Cursor.Kind)
	if err != nil {
		return nil, fail(fmt.Sprintf("loop.cursor.kind: %v", err))
	}
	exclusive = driver.Features().ExclusiveClaim
	if *curp == nil {
		spec, err := w.cursorSpec(ctx, cmd, lp, fs, scope, driver)
		if err != nil {
			return nil, fail(err.Error())
		}
		// Opening may reach the source (a consumer group or durable
		// created, a connection made): a source restarting or refusing
		// connections for now is ridden out as for a claim.
		var c cursor.Cursor
		err = w.retryTransient(ctx, cmd, "open", cancelled, func(ctx context.Context) error {
			var oerr error
			c, oerr = driver.Open(ctx, spec)
			return oerr
		})
		if err != nil {
			return nil, fail(openFailure(lp.Cursor.Kind, spec.Auth, err))
		}
		*curp = c
	}
	cur := *curp
	// Settling calls (commit, abort, ack, release) must happen even when
	// the frame's context ended, and must not hang: each gets its own
	// bounded context.
	settle := func(f func(context.Context) error) error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		return f(sctx)
	}
	// settleAgain is settle for the idempotent statements (ack, release):
	// a transient failure (the source restarting, a broken connection) is
	// tried again within settleTimeout rather than stop the loop.
	settleAgain := func(op string, f func(context.Context) error) error {
		return settle(func(sctx context.Context) error { return w.retryTransient(sctx, cmd, op, nil, f) })
	}
	release := func(f func(context.Context) error) error { return settleAgain("release", f) }

	if cmd.Settle == SettleDeadLetter {
		var p frameDonePayload
		_ = settle(func(sctx context.Context) error { p = w.deadLetter(sctx, cmd, cur); return nil })
		return nil, done(p)
	}
	// done sets Exclusive too; a frame chained to the next one is reported
	// without done (chainNext).
	p := frameDonePayload{Exclusive: exclusive}
	rows := cmd.Rows
	var claimed []cursor.Row
	var buried []ItemOutcome // rows the source set aside while claiming
	if rows == nil {
		var claim *cursor.Claim
		var claimedAt time.Time
		if held != nil {
			claim, rows, claimedAt = held.claim, held.rows, held.at
			if closed(cancelled) {
				// Cancelled before the frame started: its rows go back
				// uncommitted.
				w.giveBack(settle, claim, cmd, len(rows), abortAheadFailed)
				p.Cancelled = true
				p.returned(len(rows))
				return nil, done(p)
			}
		} else {
			if err := w.waitToClaim(ctx, cmd, fs, driver, cancelled); err != nil {
				return nil, err
			}
			if closed(cancelled) {
				// Cancelled before the claim (or while waiting for it):
				// claim nothing.
				p.Cancelled = true
				return nil, done(p)
			}
			cut := false
			err = w.retryTransient(ctx, cmd, "claim", cancelled, func(ctx context.Context) error {
				var end claimEnd
				var cerr error
				claim, end, cerr = w.claimWatched(ctx, cur, fs, cmd, cancelled, settle)
				cut = end == claimCancelled
				return cerr
			})
			if cut {
				// The cancel came while the claim ran (blocked on a lock,
				// say): nothing is on record, so whatever it claimed goes
				// back, and the frame reports the cancel.
				if err == nil {
					w.giveBack(settle, claim, cmd, len(claim.Rows), abortCutFailed)
				}
				p.Cancelled = true
				return nil, done(p)
			}
			if err != nil {
				return nil, fail(fmt.Sprintf("loop.cursor.claim: %v", err))
			}
			claimedAt = time.Now()
			if len(claim.Rows) == 0 {
				// No rows: drained, unless the source says it set aside
				// all it could and may hold more (Claim.More): the slot
				// then claims again once these dead rows are on record.
				dp := frameDonePayload{Drained: !claim.More, Items: deadItems(claim.Dead)}
				dp.Counts = countOutcomes(dp.Items)
				return nil, w.settleDrained(settle, claim, cmd, func() error { return done(dp) })
			}
			faultpoint.Hit(faultpoint.FrameClaimed)
			// The claim is on record before it commits and before any row
			// runs: a process that dies before the record leaves a claim the
			// source undoes (rolled back, or handed back by its lease), and a
			// re-issued frame resumes with exactly the recorded rows. Rows the
			// log cannot hold are given back, never committed unrecorded.
			var payload frameClaimedPayload
			var b json.RawMessage
			payload, b, err = recordedClaim(ctx, claim)
			rows = payload.Rows
			if err != nil {
				w.giveBack(settle, claim, cmd, len(rows),
					"cursor: aborting a claim whose rows cannot be recorded failed; the source's rollback or lease takes the rows back")
				return nil, fail(fmt.Sprintf("loop.cursor.claim: the claimed rows cannot be recorded: %v", err))
			}
			if err := rep.Report(ctx, w.eventOf(ctx, cmd, eventlog.TypeFrameClaimed, payload, b)); err != nil {
				w.giveBack(settle, claim, cmd, len(rows),
					"cursor: aborting a claim that could not be recorded failed; the source's rollback or lease takes the rows back")
				return nil, err
			}
		}
		faultpoint.Hit(faultpoint.FrameRecorded)
		if err := settle(claim.Commit); err != nil {
			// The rows are on record, so they must run: the source may have
			// kept the claim or given the rows back (then another frame may
			// run them too). At least once, never lost.
			w.logger().Warn("cursor: commit of a recorded claim failed; running its rows all the same",
				"step", cmd.Step, "command_id", cmd.ID, "rows", len(rows), "error", err)
		}
		p.ClaimOpenUs = time.Since(claimedAt).Microseconds()
		claimed = claim.Rows
		buried = deadItems(claim.Dead)
		if keep := w.limitBytes(claimed, fs.MaxBytes); keep < len(claimed) && allMayGoBack(claimed[keep:], lp, fs) {
			// The rows past max_bytes are recorded too: hand them back now
			// (a re-issue runs every recorded row), or run them where the
			// source cannot take them back, or where another delivery
			// would bury them unrun (mayGoBack).
			extra := claimed[keep:]
			if err := release(func(sctx context.Context) error { return cur.Release(sctx, extra) }); err == nil {
				p.returned(len(claimed) - keep)
				claimed, rows = claimed[:keep], rows[:keep]
			} else if !errors.Is(err, cursor.ErrUnsupported) {
				w.logger().Warn("cursor: releasing the rows past max_bytes failed; running them", "step", cmd.Step, "error", err)
			}
		}
	} else {
		// A re-issued frame: what its first claim set aside is reported
		// here, as that attempt's frame.done would have.
		buried = buriedItems(cmd.Buried)
		claimed = make([]cursor.Row, len(rows))
		for i, r := range rows {
			claimed[i] = cursor.Row{Key: r.Key, Values: r.Values, Lease: cursor.Lease{Attempt: r.Attempt, Token: r.Token}}
		}
	}

	part := w.startPartials(ctx, cmd, rep)
	defer part.close()
	h := &frameRun{w: w, cmd: cmd, step: step, cur: cur, scope: scope, rows: rows, claimed: claimed, part: part,
		cancelled: cancelled, settle: release, items: make([]ItemOutcome, len(rows)),
		released: map[int]bool{}, interrupted: map[int]bool{}, stopped: map[int]bool{}}
	if cmd.Settle == SettleRelease {
		h.cancelled = closedChan
	}
	h.fs = fs
	if fs.MaxSeconds > 0 {
		h.deadline = time.Now().Add(time.Duration(fs.MaxSeconds * float64(time.Second)))
	}
	// A cancel stops the frame between rows; rows in progress (and, where
	// the source cannot take rows back, the rest) may run for one lease
	// more, then they are interrupted: a cancel is bounded.
	rowsCtx, interrupt := context.WithCancelCause(ctx)
	defer interrupt(nil)
	go h.graceAfterCancel(rowsCtx, interrupt, cmd.Lease)
	if fs.Process == dsl.ProcessFrame {
		h.runFrameChain(withPartials(rowsCtx, part, ""))
	} else {
		h.runRows(rowsCtx, max(1, fs.RowConcurrency))
	}
	// The rows' partials are recorded before the frame's outcome.
	part.close()
	if len(h.stopped) > 0 {
		// The worker is stopping (an engine shutdown, a second interrupt)
		// and cut these rows short or kept them from starting: neither run
		// nor failed. They go back to the source, and the frame reports
		// the rest. A source that cannot take them back keeps them
		// claimed: then the frame is left unreported, as a killed worker
		// leaves it, and whoever resumes the execution (or the lease's
		// expiry) runs its recorded rows again: at least once, never lost
		// as failures.
		idx := make([]int, 0, len(h.stopped))
		for i := range rows {
			if h.stopped[i] {
				idx = append(idx, i)
			}
		}
		if err := h.handBack(idx); err != nil {
			w.logger().Warn("worker stopping: the frame's unfinished rows stay claimed; it is left for a resume to run again",
				"step", cmd.Step, "command_id", cmd.ID, "rows", len(idx), "error", err)
			return nil, ErrClosed
		}
		p.returned(len(idx))
	}
	if len(h.unstarted) > 0 {
		// Interrupted before they started: hand them back if the source
		// can, else they are abandoned (claimed, never run).
		if err := h.handBack(h.unstarted); err == nil {
			h.nReleased += len(h.unstarted)
		} else {
			for _, i := range h.unstarted {
				h.items[i] = ItemOutcome{Key: rows[i].Key, Outcome: OutcomeError, Error: "execution cancelled before the row started"}
				h.interrupted[i] = true
			}
		}
	}
	if len(h.late) > 0 {
		// Out of time before they started: back to the source for a later
		// frame, neither run nor failed. A source that cannot take them
		// back keeps them claimed: they are recorded as failed.
		if err := h.handBack(h.late); err == nil {
			p.returned(len(h.late))
		} else {
			for _, i := range h.late {
				h.items[i] = ItemOutcome{Key: rows[i].Key, Outcome: OutcomeError,
					Error: fmt.Sprintf("frame max_seconds reached before the row started, and the source could not take it back: %v", err)}
			}
		}
	}
	var (
		bad, ok []cursor.Row
		items   []ItemOutcome
		cut     []string // keys of interrupted rows
	)
	if len(h.released) == 0 && allOK(h.items) {
		// The common frame: every row acked and recorded as it ran.
		ok, items = claimed, h.items
	} else {
		ok, items = make([]cursor.Row, 0, len(h.items)), make([]ItemOutcome, 0, len(h.items))
		for i, it := range h.items {
			switch {
			case h.released[i]:
				continue
			case it.Outcome == OutcomeOK:
				ok = append(ok, claimed[i])
			default:
				// The source gets the row's error with it (Row.Error), so
				// a release statement can keep it and a later dead letter
				// say why the row died.
				r := claimed[i]
				r.Error = rowError(ctx, it.Error)
				bad = append(bad, r)
				if h.interrupted[i] {
					cut = append(cut, it.Key)
				}
			}
			items = append(items, it)
		}
	}
	if len(ok) > 0 {
		if err := settleAgain("ack", func(sctx context.Context) error { return cur.Ack(sctx, ok) }); err != nil {
			switch {
			case errors.Is(err, cursor.ErrStaleLease):
				// The source handed some rows to another claimer after their
				// lease ran out: their bodies ran here, and will run there
				// again; nothing to stop the loop for.
				w.logger().Warn("cursor refused an ack: rows were re-issued", "step", cmd.Step, "command_id", cmd.ID, "error", err)
			default:
				if h.fatal == "" {
					h.fatal = fmt.Sprintf("loop.cursor: ack: %v", err)
				}
				// The rows ran, but the source still holds them claimed and
				// the loop stops: hand them back rather than strand them
				// (they run again, at least once, in a later drain).
				if rerr := release(func(sctx context.Context) error { return cur.Release(sctx, ok) }); rerr == nil {
					p.Released += len(ok)
				} else {
					for _, r := range ok {
						p.Abandoned = append(p.Abandoned, r.Key)
					}
					w.logger().Error("cursor: rows whose ack failed could not be handed back; they stay claimed in the source",
						"step", cmd.Step, "command_id", cmd.ID, "rows", len(ok), "error", rerr)
				}
			}
		}
	}
	if len(bad) > 0 {
		err := release(func(sctx context.Context) error { return cur.Release(sctx, bad) })
		switch {
		case err == nil:
			p.Released += len(bad)
		case errors.Is(err, cursor.ErrUnsupported):
			// No release statement: failed rows stay with the playbook's
			// own SQL, as documented; interrupted ones are recorded as
			// abandoned, the others as unreleased, so that the loop's
			// count of rows left claimed includes them (neither stops
			// the loop).
			if len(cut) > 0 {
				p.Abandoned = append(p.Abandoned, cut...)
				w.logger().Error("cursor: rows a cancel interrupted could not be handed back; they stay claimed in the source",
					"step", cmd.Step, "command_id", cmd.ID, "keys", cut, "error", err)
			}
			for _, r := range bad {
				if !slices.Contains(cut, r.Key) {
					p.Unreleased = append(p.Unreleased, r.Key)
				}
			}
		case driver.Features().LeaseExpiry:
			// The source gives them out again once their lease runs out.
			w.logger().Warn("cursor: failed rows could not be handed back; they come back when their lease runs out",
				"step", cmd.Step, "command_id", cmd.ID, "rows", len(bad), "error", err)
		default:
			// The release statement failed (a broken statement, a lost
			// connection): the rows stay claimed and nothing brings them
			// back. They are recorded, and the loop stops on it, as on a
			// failed ack, rather than drain on with rows stranded.
			for _, r := range bad {
				p.Abandoned = append(p.Abandoned, r.Key)
			}
			if h.fatal == "" {
				h.fatal = fmt.Sprintf("loop.cursor: release: %v", err)
			}
			w.logger().Error("cursor: failed rows could not be handed back; they stay claimed in the source",
				"step", cmd.Step, "command_id", cmd.ID, "rows", len(bad), "error", err)
		}
	}
	p.returned(h.nReleased)
	p.Cancelled = p.Cancelled || h.nReleased > 0
	items = append(items, buried...)
	p.Items, p.Counts, p.Ctx, p.Fail = items, countOutcomes(items), h.ctxDelta, h.fatal
	faultpoint.Hit(faultpoint.FrameRan)
	// Drain is read again here, not only when the frame began: a worker
	// told to stop while the frame ran (a SIGTERM) claims no rows ahead.
	if !mayChain || w.draining.Load() {
		return nil, done(p)
	}
	next, reported, drained, err := w.chainNext(ctx, cmd, rep, cur, driver, fs, &p, cancelled, settle, start)
	if reported {
		return next, err
	}
	if err != nil {
		w.logger().Debug("frame not chained; reporting it alone", "command_id", cmd.ID, "error", err)
	}
	if drained != nil {
		return nil, w.settleDrained(settle, drained, cmd, func() error { return done(p) })
	}
	return nil, done(p)
}

// settleDrained reports a claim of no rows (report records its
// frame.done, which lists its Dead rows) and settles it once that is
// recorded: Commit lets the source move them to its dead letter, Abort
// leaves them for a later claim to report again, since the log does not
// say they are dead. It returns report's error.
//
// That record may end the loop, and the loop's Finish may drop what the
// commit needs (redisstream's own consumer group, with the entries the
// claim holds): Finish waits for the commit (Worker.settling).
func (w *Worker) settleDrained(settle func(func(context.Context) error) error, claim *cursor.Claim, cmd *Command, report func() error) error {
	defer w.settling.begin(cmd)()
	if recorded := report(); recorded != nil {
		w.giveBack(settle, claim, cmd, 0, "cursor: aborting a drained claim whose dead rows could not be reported failed; the source's lease takes them back")
		return recorded
	}
	if err := settle(claim.Commit); err != nil {
		w.logger().Warn("cursor: commit of a drained claim failed; its dead rows, reported, may be reported again",
			"step", cmd.Step, "command_id", cmd.ID, "dead", len(claim.Dead), "error", err)
	}
	return nil
}

// mayGoBack reports whether a row the frame has not run may be handed
// back for a later frame (max_bytes, max_seconds): not when the source
// counts its deliveries and the next one would pass max_attempts, so
// that the next claim would bury it unrun; such a row runs now.
func mayGoBack(r cursor.Row, lp *dsl.Loop, fs dsl.FrameSpec) bool {
	limit := max(1, fs.MaxAttempts)
	if lp != nil && lp.Cursor != nil && lp.Cursor.MaxAttempts > 0 {
		limit = lp.Cursor.MaxAttempts
	}
	return r.Lease.Attempt == 0 || r.Lease.Attempt < limit
}

// allMayGoBack is mayGoBack for every row of rows.
func allMayGoBack(rows []cursor.Row, lp *dsl.Loop, fs dsl.FrameSpec) bool {
	for _, r := range rows {
		if !mayGoBack(r, lp, fs) {
			return false
		}
	}
	return true
}

// Retries of a cursor operation that failed transiently (cursor.Transient):
// an open or a claim is tried again for up to transientBudget from its
// first failure, an ack or release within settleTimeout, backing off from
// transientFirst to transientMax.
// A source restarting or unreachable for a while is ridden out; a longer
// outage fails the loop as any failed claim does.
const (
	transientBudget = time.Minute
	transientFirst  = 100 * time.Millisecond
	transientMax    = 5 * time.Second
)

// retryTransient runs f until it succeeds, fails other than transiently,
// the budget (transientBudget, or ctx's deadline) runs out, ctx ends or
// the execution is cancelled (cancelled, when not nil), and returns its
// last error.
func (w *Worker) retryTransient(ctx context.Context, cmd *Command, op string, cancelled <-chan struct{}, f func(context.Context) error) error {
	clk := w.clock()
	// The budget runs from the first failure: a claim cut after a lease
	// of silence is still tried again.
	var deadline time.Time
	wait := transientFirst
	for {
		err := f(ctx)
		if err == nil || !cursor.Transient(err) || (cancelled != nil && closed(cancelled)) {
			return err
		}
		if deadline.IsZero() {
			deadline = clk.Now().Add(transientBudget)
			if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
				deadline = d
			}
		}
		if !clk.Now().Add(wait).Before(deadline) {
			return err
		}
		w.logger().Warn("cursor: transient failure; trying again", "op", op, "step", cmd.Step, "command_id", cmd.ID,
			"in", wait, "error", err)
		if sleepCtx(ctx, clk, wait) != nil {
			return err
		}
		wait = min(2*wait, transientMax)
	}
}

// openFailure is the message of a cursor that could not be opened. A
// driver's *cursor.ClaimError already names the kind and the credential's
// alias (never the credential): it is not said twice.
func openFailure(kind, auth string, err error) string {
	var ce *cursor.ClaimError
	if errors.As(err, &ce) && ce.Kind == kind && ce.Auth == auth {
		return "loop.cursor: " + err.Error()
	}
	return fmt.Sprintf("loop.cursor: open %s cursor (auth %q): %v", kind, auth, err)
}

// abortAheadFailed is the warning of a claim made ahead that could not be
// aborted: only transactional sources chain, so their rollback takes the
// rows back.
const abortAheadFailed = "cursor: aborting a claim made ahead failed; the source's rollback takes the rows back"

// giveBack aborts claim, n rows claimed for cmd, and logs warning if the
// abort fails.
func (w *Worker) giveBack(settle func(func(context.Context) error) error, claim *cursor.Claim, cmd *Command, n int, warning string) {
	if err := settle(claim.Abort); err != nil {
		w.logger().Warn(warning, "step", cmd.Step, "command_id", cmd.ID, "rows", n, "error", err)
	}
}

// deadItems are the outcomes of rows a source set aside while claiming
// (cursor.Claim.Dead).
func deadItems(rows []cursor.Row) []ItemOutcome { return buriedItems(rowKeys(rows)) }

// buriedItems are the outcomes of the rows of keys that a source set
// aside while claiming.
func buriedItems(keys []string) []ItemOutcome {
	if len(keys) == 0 {
		return nil
	}
	items := make([]ItemOutcome, len(keys))
	for i, k := range keys {
		items[i] = ItemOutcome{Key: k, Outcome: OutcomeDead, Error: "set aside by the source when claimed: past max_attempts"}
	}
	return items
}

// rowKeys are the keys of rows (nil if none).
func rowKeys(rows []cursor.Row) []string {
	if len(rows) == 0 {
		return nil
	}
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	return keys
}

// allOK reports whether every row's outcome is ok.
func allOK(items []ItemOutcome) bool {
	for i := range items {
		if items[i].Outcome != OutcomeOK {
			return false
		}
	}
	return true
}

// recordedClaim returns a claim's frame.claimed payload and its JSON. A
// row value JSON cannot hold fails the encoding (a NaN or ±Inf: a float
// column of postgres or ClickHouse, a SQLite REAL); the claimed rows'
// values are then sanitized as any other payload is (non-finite floats
// become "NaN", "+Inf", "-Inf"), in place, and the payload is encoded
// again. A frame records its rows before they run and a re-issued frame
// runs the recorded rows, so the body sees the values the log holds. An
// error: rows the log cannot hold.
func recordedClaim(ctx context.Context, claim *cursor.Claim) (frameClaimedPayload, json.RawMessage, error) {
	p := frameClaimedPayload{Rows: frameRowsOf(claim.Rows), Buried: rowKeys(claim.Dead)}
	b, err := encodeReport(ctx, p)
	if err == nil {
		return p, b, nil
	}
	for i := range claim.Rows {
		v, serr := sanitize(claim.Rows[i].Values, "rows["+strconv.Itoa(i)+"].values", 0, nil)
		if serr != nil {
			return p, nil, serr
		}
		claim.Rows[i].Values, _ = v.(map[string]any)
	}
	p.Rows = frameRowsOf(claim.Rows)
	b, err = encodeReport(ctx, p)
	return p, b, err
}

// waitToClaim waits, before frame cmd claims, for what an earlier lost
// attempt may have claimed without recording it to be back in the source:
// the loop's hold (Command.Hold), and on a source with leases of its own
// a lost attempt's lease. A cancel ends the wait: the frame has claimed
// nothing, and the cancel waits for it.
func (w *Worker) waitToClaim(ctx context.Context, cmd *Command, fs dsl.FrameSpec, driver cursor.Driver, cancelled <-chan struct{}) error {
	if closed(cancelled) {
		return nil
	}
	if cmd.Hold > 0 {
		w.logger().Info("cursor: the slot found no rows while a lost frame attempt may still hold some it claimed; claiming again once the source has taken them back",
			"step", cmd.Step, "command_id", cmd.ID, "wait", cmd.Hold)
		// In real time, not the worker's clock: the source counts the
		// lease on its own (an idle transaction's timeout, an entry's idle
		// time).
		if err := sleepUnlessCancelled(ctx, clock.System(), cmd.Hold, cancelled); err != nil {
			return err
		}
	}
	if cmd.Lost && !driver.Features().TransactionalClaim {
		// The lost attempt may have claimed rows it never recorded, which
		// the source holds under leases of its own (taken before the
		// loss, so before now): claim once they ran out, so that this
		// frame takes them back rather than leave them behind the drain.
		w.logger().Info("cursor: waiting out the source's lease before claiming again: the lost attempt of this frame may have claimed rows it never recorded",
			"step", cmd.Step, "command_id", cmd.ID, "lease_seconds", fs.LeaseSeconds)
		return sleepUnlessCancelled(ctx, w.clock(), time.Duration(fs.LeaseSeconds*float64(time.Second)), cancelled)
	}
	return nil
}

// frameScope is the render context of frame command cmd of loop lp (its
// scope, with stored results resolvable and the run's args) and its frame
// fields rendered in it, as the orchestrator renders them for the
// command's lease and heartbeat (State.frameOf).
func (w *Worker) frameScope(ctx context.Context, cmd *Command, lp *dsl.Loop) (map[string]any, dsl.FrameSpec, error) {
	scope := cmd.commandScope()
	fs, err := lp.Frame.Resolve(scope)
	if err != nil {
		return nil, fs, err
	}
	localRefs(ctx, scope, w.results())
	addArgs(scope, cmd.Args)
	return scope, fs, nil
}

// frameRowsOf is what a frame records of its claimed rows.
func frameRowsOf(claimed []cursor.Row) []FrameRow {
	rows := make([]FrameRow, len(claimed))
	for i, r := range claimed {
		rows[i] = FrameRow{Key: r.Key, Values: r.Values, Attempt: r.Lease.Attempt, Token: r.Lease.Token}
	}
	return rows
}

// chainNext claims the slot's next rows ahead and reports the frame's
// outcome p together with them (ChainReporter). It returns the next frame
// to run (nil when none was issued for the slot, or the report was
// refused) with reported set; reported is false when p has yet to be
// reported alone: the reporter cannot chain, the frame ends the slot's
// run, the source is drained, or the chained report was not recorded
// (err then says why; the claim made ahead was given back). drained is a
// claim of no rows whose Dead rows were added to p: the caller settles it
// once p is reported (settleDrained).
func (w *Worker) chainNext(ctx context.Context, cmd *Command, rep Reporter, cur cursor.Cursor, driver cursor.Driver,
	fs dsl.FrameSpec, p *frameDonePayload, cancelled <-chan struct{}, settle func(func(context.Context) error) error, start time.Time,
) (next *chainedFrame, reported bool, drained *cursor.Claim, err error) {
	cr, ok := rep.(ChainReporter)
	if !ok || !cr.MayChain() || !driver.Features().TransactionalClaim || closed(cancelled) ||
		p.Fail != "" || p.Cancelled || p.Released > 0 || len(p.Abandoned) > 0 || len(p.Ctx) > 0 {
		// A frame that changed ctx is not chained either: the next claim
		// may render with it.
		return nil, false, nil, nil
	}
	claim, end, err := w.claimWatched(ctx, cur, fs, cmd, cancelled, settle)
	switch end {
	case claimCancelled:
		// Cancelled while claiming ahead: this frame is reported alone.
		if err == nil {
			w.giveBack(settle, claim, cmd, len(claim.Rows), abortAheadFailed)
		}
		return nil, false, nil, errClaimCut
	case claimSilent:
		// Given back: this frame is reported alone; the slot's next
		// frame claims afresh.
		w.logger().Warn("cursor: a claim made ahead was cut", "step", cmd.Step, "command_id", cmd.ID, "error", err)
		return nil, false, nil, err
	}
	if err != nil {
		// A claim error the slot's next frame meets again and reports.
		return nil, false, nil, err
	}
	if len(claim.Rows) == 0 {
		// Drained: the next frame finds it so. What the source set aside
		// meanwhile is this frame's to report, and the claim is settled
		// once it is.
		if len(claim.Dead) > 0 {
			p.Items = append(p.Items, deadItems(claim.Dead)...)
			p.Counts = countOutcomes(p.Items)
		}
		return nil, false, claim, nil
	}
	claimedAt := time.Now()
	faultpoint.Hit(faultpoint.FrameClaimed)
	payload, claimed, err := recordedClaim(ctx, claim)
	rows := payload.Rows
	if err != nil {
		// Rows the log cannot hold: hand them back and report this frame
		// alone; the slot's next frame claims again and fails, saying so.
		w.giveBack(settle, claim, cmd, len(rows), abortAheadFailed)
		return nil, false, nil, nil //nolint:nilerr // the next frame's own claim reports it
	}
	p.Ms = time.Since(start).Milliseconds()
	// Until the answer comes, the next frame's command may already hold
	// these rows on record (an answer lost with an orchestrator that
	// died): keep its lease alive, so that it is not re-issued while the
	// claim is still ours, uncommitted.
	stop := w.heartbeat(ctx, &Command{ExecutionID: cmd.ExecutionID, ID: nextFrameID(cmd), Lease: cmd.Lease, Heartbeat: cmd.Heartbeat}, rep, false)
	ncmd, err := cr.ReportChained(ctx, w.event(ctx, cmd, eventlog.TypeFrameDone, *p), claimed)
	stop()
	if err != nil || ncmd == nil {
		w.giveBack(settle, claim, cmd, len(rows), abortAheadFailed)
		switch {
		case err == nil:
			return nil, true, nil, nil // recorded; the slot has no next frame
		case errors.Is(err, ErrStale), errors.Is(err, ErrUnknownExecution), errors.Is(err, ErrClosed), ctx.Err() != nil:
			return nil, true, nil, err
		}
		return nil, false, nil, err
	}
	return &chainedFrame{cmd: ncmd, held: &heldClaim{claim: claim, rows: rows, at: claimedAt}}, true, nil, nil
}

// abortCutFailed is the warning of a claim a cancel came during that could
// not be aborted.
const abortCutFailed = "cursor: aborting a claim the execution's cancel came during failed; the source's rollback or lease takes the rows back"

// abortSilentFailed is the warning of a claim cut by its limit that could
// not be aborted.
const abortSilentFailed = "cursor: aborting a claim cut for not returning in time failed; the source's rollback or lease takes the rows back"

// errClaimCut says a claim was cut short by the execution's cancel.
var errClaimCut = errors.New("execution cancelled while claiming")

// claimEnd says how a watched claim (watchClaim) ended.
type claimEnd int

const (
	// claimReturned: the claim returned on its own.
	claimReturned claimEnd = iota
	// claimCancelled: the execution's cancel ended it.
	claimCancelled
	// claimSilent: it had not returned within its limit (claimLimit).
	claimSilent
)

// claimLimit is how long one claim may go unanswered: the frame's lease.
// A claim that takes longer is cut and tried again (a fresh connection
// gets past a path black-holed under the old one); a claim that waits
// on locks for longer than a lease needs a longer lease_seconds.
func claimLimit(fs dsl.FrameSpec) time.Duration {
	secs := fs.LeaseSeconds
	if secs <= 0 {
		secs = dsl.DefaultFrameLeaseSeconds
	}
	return time.Duration(secs * float64(time.Second))
}

// silentClaim is the error of a claim cut by its limit: transient, so
// the claim is tried again. A claim that is slow rather than unanswered
// (a long scan, a wait on locks) is cut the same way: the error says
// which setting lets it take longer.
func silentClaim(limit time.Duration, err error) error {
	const why = "the source is not answering, or the claim needs longer than lease_seconds"
	if err == nil {
		return fmt.Errorf("%w: the claim did not return within %s (the frame's lease); %s",
			cursor.ErrTransient, limit, why)
	}
	return fmt.Errorf("%w: the claim did not return within %s (the frame's lease); %s: %w",
		cursor.ErrTransient, limit, why, err)
}

// claimWatched claims up to the frame's max_rows from cur under
// watchClaim, with the frame's lease as the limit. A claim the limit cut
// is given back here and comes back as silentClaim's transient error, with
// no claim; a claim the cancel cut comes back as it returned, for the
// caller to give back or not.
func (w *Worker) claimWatched(ctx context.Context, cur cursor.Cursor, fs dsl.FrameSpec, cmd *Command,
	cancelled <-chan struct{}, settle func(func(context.Context) error) error,
) (*cursor.Claim, claimEnd, error) {
	var claim *cursor.Claim
	var err error
	limit := claimLimit(fs)
	end := watchClaim(ctx, w.clock(), cancelled, limit, func(cctx context.Context) { claim, err = cur.Claim(cctx, max(1, fs.MaxRows)) })
	if end == claimSilent {
		if err == nil {
			w.giveBack(settle, claim, cmd, len(claim.Rows), abortSilentFailed)
		}
		return nil, end, silentClaim(limit, err)
	}
	return claim, end, err
}

// watchClaim runs claim with a context that ends when ctx does or, while
// claim runs, when the execution is cancelled (cancelled closes) or limit
// passes on clk, so that a claim blocked in its source (a lock another
// session holds, a connection gone silent) neither keeps a cancel waiting
// until the source answers nor holds the slot for ever. It reports what
// ended the claim: once the context was ended, whatever the claim
// returned is to be given back. The context never ends once claim
// returned: a transactional claim's transaction lives on in it until it
// is committed or aborted, and database/sql rolls a transaction back when
// its context ends.
func watchClaim(ctx context.Context, clk clock.Clock, cancelled <-chan struct{}, limit time.Duration, claim func(context.Context)) claimEnd {
	cctx := &claimCtx{Context: ctx, done: make(chan struct{})}
	returned := make(chan struct{})
	watched := make(chan claimEnd, 1)
	timer := clk.NewTimer(limit)
	defer timer.Stop()
	go func() {
		select {
		case <-cancelled: // nil: never
			cctx.end(context.Canceled)
			watched <- claimCancelled
		case <-timer.C():
			cctx.end(context.DeadlineExceeded)
			watched <- claimSilent
		case <-ctx.Done():
			cctx.end(ctx.Err())
			watched <- claimReturned
		case <-returned:
			watched <- claimReturned
		}
	}()
	claim(cctx)
	close(returned)
	return <-watched
}

// claimCtx is a claim's context (watchClaim): ctx's values and
// deadline, ended only by its watch.
type claimCtx struct {
	context.Context
	done chan struct{}
	mu   sync.Mutex
	err  error
	// after holds the functions AfterFunc registered, run when the
	// context ends.
	after map[*func()]struct{}
}

// AfterFunc arranges for f to run in its own goroutine once c ends, as
// context.AfterFunc does; stop unregisters it, reporting whether that
// kept it from running. The context package looks for this method on a
// parent it does not know: a context derived from c (a driver's timeout,
// its connection's watch) is then ended through it, rather than by a
// goroutine of its own that waits on c.Done for as long as it lives, one
// more goroutine for every claim.
func (c *claimCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	key := &f
	if c.after == nil {
		c.after = make(map[*func()]struct{}, 1)
	}
	c.after[key] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.after[key]
		delete(c.after, key)
		return ok
	}
}

func (c *claimCtx) Done() <-chan struct{} { return c.done }

func (c *claimCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *claimCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
		for f := range c.after {
			go (*f)()
		}
		c.after = nil
	}
}

// closedChan is a channel that is always closed: a release attempt runs
// as if its execution had been cancelled, whether or not this worker
// heard of the cancel.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// frameRun is one frame's rows being run.
type frameRun struct {
	w         *Worker
	cmd       *Command
	step      *dsl.Step
	cur       cursor.Cursor
	scope     map[string]any
	rows      []FrameRow
	claimed   []cursor.Row
	cancelled <-chan struct{}
	settle    func(func(context.Context) error) error
	deadline  time.Time
	fs        dsl.FrameSpec
	// part takes the partial results of the rows' tools.
	part *partials

	mu        sync.Mutex
	items     []ItemOutcome
	fatal     string
	ctxDelta  map[string]any
	released  map[int]bool // rows handed back unstarted (cancel)
	nReleased int
	// finish: the source could not take unstarted rows back on cancel, so
	// every row runs.
	finish bool
	// unstarted lists the rows not started when the cancel grace ran out;
	// interrupted marks the rows it cut short (or left unstarted).
	unstarted []int
	// late lists the rows not started by the frame's max_seconds.
	late        []int
	interrupted map[int]bool
	// stopped marks the rows the worker's stopping (an engine shutdown, not
	// a cancel) cut short or kept from starting: they are not outcomes.
	stopped map[int]bool

	// dispatchMu orders the row goroutines' nextRow: dispatched rows were
	// handed out or passed over, and none starts after dispatchEnded.
	// stopForCancel, finish, late and unstarted are nextRow's while rows
	// run.
	dispatchMu    sync.Mutex
	dispatched    int
	dispatchEnded bool
}

// workerStopping reports whether ctx, a frame's rows' context, ended
// because the worker is stopping rather than by a cancel's grace.
func workerStopping(ctx context.Context) bool { return ctx.Err() != nil && !cutShort(ctx) }

// handBack releases the claimed rows at idx, which never started, to the
// source and marks them released (kept out of the frame's outcomes).
func (f *frameRun) handBack(idx []int) error {
	rest := make([]cursor.Row, len(idx))
	for n, i := range idx {
		rest[n] = f.claimed[i]
	}
	if err := f.settle(func(sctx context.Context) error { return f.cur.Release(sctx, rest) }); err != nil {
		return err
	}
	for _, i := range idx {
		f.released[i] = true
	}
	return nil
}

// graceAfterCancel interrupts the frame's rows (ctx, through interrupt)
// one grace period after the execution was cancelled.
func (f *frameRun) graceAfterCancel(ctx context.Context, interrupt context.CancelCauseFunc, grace time.Duration) {
	select {
	case <-f.cancelled:
	case <-ctx.Done():
		return
	}
	t := f.w.clock().NewTimer(grace)
	defer t.Stop()
	select {
	case <-t.C():
		f.w.logger().Warn("execution cancelled: interrupting the frame's rows still running a lease later",
			"step", f.cmd.Step, "command_id", f.cmd.ID, "lease", grace)
		interrupt(errCancelGrace)
	case <-ctx.Done():
	}
}

// cutShort reports whether the cancel grace interrupted the rows.
func cutShort(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errCancelGrace) }

// stopForCancel is called before a row (or the frame's chain) starts.
// Once the execution is being cancelled it hands the rows from idx on back
// to the source and reports true, unless the source cannot take them
// back: then the rows it holds run to the end rather than be stranded.
func (f *frameRun) stopForCancel(idx int) bool {
	if f.finish || !closed(f.cancelled) {
		return false
	}
	rest := f.claimed[idx:]
	err := f.settle(func(sctx context.Context) error { return f.cur.Release(sctx, rest) })
	if err != nil {
		f.finish = true
		if errors.Is(err, cursor.ErrUnsupported) {
			f.w.logger().Info("execution cancelled, but the cursor cannot hand rows back; running the frame's remaining rows",
				"step", f.cmd.Step, "command_id", f.cmd.ID, "rows", len(rest))
		} else {
			f.w.logger().Warn("execution cancelled, but releasing the frame's remaining rows failed; running them",
				"step", f.cmd.Step, "command_id", f.cmd.ID, "rows", len(rest), "error", err)
		}
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := idx; i < len(f.rows); i++ {
		f.released[i] = true
	}
	f.nReleased = len(rest)
	return true
}

// runFrameChain runs the chain once on every row (process: frame).
func (f *frameRun) runFrameChain(ctx context.Context) {
	lp := f.step.Loop
	if f.stopForCancel(0) {
		return
	}
	if cutShort(ctx) {
		for i := range f.rows {
			f.unstarted = append(f.unstarted, i)
		}
		return
	}
	if ctx.Err() != nil {
		for i := range f.rows {
			f.stopped[i] = true
		}
		return
	}
	values := make([]any, len(f.rows))
	for i, r := range f.rows {
		values[i] = r.Values
	}
	sc := copyMap(f.scope)
	setIter(sc, lp.Iterator, values, f.cmd.Frame, 0, f.cmd.LoopVars)
	iter := sc["iter"].(map[string]any)
	iter[lp.Iterator+"_rows"] = values
	sc["frame"] = map[string]any{"rows": values, "index": f.cmd.Frame, "row_count": len(values)}
	t0 := time.Now()
	res := f.w.runChain(ctx, f.cmd, f.step, sc, 0, 1, nil, false)
	outcome, msg := OutcomeOK, ""
	if res.failed {
		outcome, msg = OutcomeError, res.err
		if res.explicit {
			f.fatal = res.err
		}
	}
	ms := time.Since(t0).Milliseconds()
	if res.failed && workerStopping(ctx) {
		for i := range f.rows {
			f.stopped[i] = true
		}
		return
	}
	cut := res.failed && cutShort(ctx)
	if cut {
		msg = errCancelGrace.Error()
	}
	for i, r := range f.rows {
		f.items[i] = ItemOutcome{Key: r.Key, Outcome: outcome, Ms: ms, Error: msg}
		if cut {
			f.interrupted[i] = true
		}
	}
	f.ctxDelta = res.ctx
}

// runRows runs the chain per row (process: row), at most conc at once.
//
// Rows run on conc goroutines that live as long as the frame (a goroutine
// per row started small and grew its stack through every row's tool chain
// again), each taking the next row itself when it is free (nextRow): a
// dispatcher handing rows over a channel woke two goroutines per row.
func (f *frameRun) runRows(ctx context.Context, conc int) {
	var wg sync.WaitGroup
	for range min(conc, len(f.rows)) {
		wg.Go(func() { f.rowLoop(ctx, &wg) })
	}
	wg.Wait()
}

// nextRow returns the next row to start, deciding for the rows it passes
// over (late, after a fatal failure), or false once no more rows start:
// all were taken, or a cancel or the worker's stopping keeps the rest
// from starting. The row goroutines call it one at a time (dispatchMu).
func (f *frameRun) nextRow(ctx context.Context) (int, bool) {
	f.dispatchMu.Lock()
	defer f.dispatchMu.Unlock()
	for !f.dispatchEnded && f.dispatched < len(f.rows) {
		i := f.dispatched
		f.dispatched++
		// The first row always starts, so that every frame makes progress
		// however slow the claim was.
		if i > 0 && !f.deadline.IsZero() && time.Now().After(f.deadline) && mayGoBack(f.claimed[i], f.step.Loop, f.fs) {
			f.late = append(f.late, i)
			continue
		}
		f.mu.Lock()
		stopNow := f.fatal != ""
		f.mu.Unlock()
		if stopNow {
			f.setItem(i, ItemOutcome{Key: f.rows[i].Key, Outcome: OutcomeError, Error: "frame failed before the row started"})
			continue
		}
		if f.stopForCancel(i) {
			f.dispatchEnded = true
			return 0, false
		}
		// Cut short by a cancel's grace, or by the worker stopping (an
		// engine shutdown): the rest never starts, and goes back.
		if ctx.Err() != nil {
			f.dispatchEnded = true
			cut := cutShort(ctx) // ctx has ended: its cause stays
			f.mu.Lock()
			for j := i; j < len(f.rows); j++ {
				if cut {
					f.unstarted = append(f.unstarted, j)
				} else {
					f.stopped[j] = true
				}
			}
			f.mu.Unlock()
			return 0, false
		}
		return i, true
	}
	return 0, false
}

// rowLoop runs rows taken with nextRow until none is left. A tool that
// ends its goroutine (runtime.Goexit, as t.FailNow in a tool does) cannot
// be stopped from ending this one: its row fails, and another goroutine
// takes this one's place, so the frame's other rows still run.
func (f *frameRun) rowLoop(ctx context.Context, wg *sync.WaitGroup) {
	for {
		i, ok := f.nextRow(ctx)
		if !ok {
			return
		}
		returned := false
		func() {
			defer func() {
				if returned {
					return
				}
				f.w.logger().Error("a tool ended its goroutine (runtime.Goexit: t.FailNow in a tool?); its row fails",
					"step", f.cmd.Step, "command_id", f.cmd.ID, "row", f.rows[i].Key)
				f.setItem(i, ItemOutcome{Key: f.rows[i].Key, Outcome: OutcomeError, Error: errGoexit.Error()})
				wg.Go(func() { f.rowLoop(ctx, wg) })
			}()
			f.runRow(ctx, i)
			returned = true
		}()
	}
}

// errGoexit is the failure of a tool that ended its goroutine.
var errGoexit = errors.New("the tool ended its goroutine (runtime.Goexit) instead of returning")

// runRow runs the chain for row i and records its outcome.
func (f *frameRun) runRow(ctx context.Context, i int) {
	sc := make(map[string]any, len(f.scope)+iterKeys)
	maps.Copy(sc, f.scope)
	setIter(sc, f.step.Loop.Iterator, f.rows[i].Values, i, 0, f.cmd.LoopVars)
	t0 := time.Now()
	res := f.w.runChain(withPartials(ctx, f.part, f.rows[i].Key), f.cmd, f.step, sc, 0, 1, nil, false)
	it := ItemOutcome{Key: f.rows[i].Key, Outcome: OutcomeOK, Ms: time.Since(t0).Milliseconds()}
	if res.failed && workerStopping(ctx) {
		// Cut short by the worker stopping: not the row's outcome.
		f.mu.Lock()
		f.stopped[i] = true
		f.mu.Unlock()
		return
	}
	if res.failed {
		it.Outcome, it.Error = OutcomeError, res.err
	}
	cut := res.failed && cutShort(ctx)
	if cut {
		it.Error = errCancelGrace.Error()
	}
	f.mu.Lock()
	f.items[i] = it
	if cut {
		f.interrupted[i] = true
	}
	if res.failed && res.explicit && f.fatal == "" {
		f.fatal = fmt.Sprintf("row %s: %s", f.rows[i].Key, res.err)
	}
	if len(res.ctx) > 0 {
		if f.ctxDelta == nil {
			f.ctxDelta = map[string]any{}
		}
		merge(f.ctxDelta, res.ctx)
	}
	f.mu.Unlock()
	faultpoint.Hit(faultpoint.FrameRow)
}

func (f *frameRun) setItem(i int, it ItemOutcome) {
	f.mu.Lock()
	f.items[i] = it
	f.mu.Unlock()
}

// deadLetter hands a frame's recorded rows to the cursor's dead letter
// (the engine gave up on them) and returns the frame.done that reports
// them dead, with the rows its claim set aside. A source that cannot dead-letter (a SQL cursor without a
// dead_letter statement) keeps the rows claimed: that is logged loudly
// and recorded in the rows' error.
func (w *Worker) deadLetter(ctx context.Context, cmd *Command, cur cursor.Cursor) frameDonePayload {
	rows := make([]cursor.Row, len(cmd.Rows))
	for i, r := range cmd.Rows {
		rows[i] = cursor.Row{Key: r.Key, Values: r.Values, Lease: cursor.Lease{Attempt: r.Attempt, Token: r.Token}}
	}
	reason := cmd.SettleReason
	var err error
	if dl, ok := cur.(cursor.DeadLetterer); ok {
		err = dl.DeadLetter(ctx, rows, reason)
	} else {
		err = fmt.Errorf("%w: the cursor has no dead letter", cursor.ErrUnsupported)
	}
	msg := reason
	if err != nil {
		msg = reason + "; the source did not take the dead letter: " + err.Error()
		w.logger().Error("cursor: the engine gave up on rows that the source could not dead-letter; they stay claimed in the source",
			"step", cmd.Step, "command_id", cmd.ID, "keys", rowKeys(rows), "reason", reason, "error", err)
	}
	items := make([]ItemOutcome, len(rows), len(rows)+len(cmd.Buried))
	for i, r := range rows {
		items[i] = ItemOutcome{Key: r.Key, Outcome: OutcomeDead, Error: msg}
	}
	// What the frame's first claim set aside is reported here too, as
	// that attempt's frame.done would have.
	items = append(items, buriedItems(cmd.Buried)...)
	return frameDonePayload{Items: items, Counts: countOutcomes(items)}
}

// limitBytes returns how many of the claimed rows fit in max bytes (their
// JSON size); the first row always does, so a frame makes progress.
func (w *Worker) limitBytes(rows []cursor.Row, maxBytes int64) int {
	if maxBytes <= 0 || len(rows) < 2 {
		return len(rows)
	}
	var total int64
	for i, r := range rows {
		b, _ := json.Marshal(r.Values)
		total += int64(len(b))
		if i > 0 && total > maxBytes {
			return i
		}
	}
	return len(rows)
}

// slotID is a frame slot's __worker_slot_id: a positive integer below
// 2^53 (exact in BIGINT, TEXT and JSON numbers) hashed from the
// execution, the loop run and the slot index, so it differs across loops
// and executions and stays the same for every frame of the slot.
func slotID(executionID, run string, slot int) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(executionID))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(run))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.Itoa(slot)))
	id := int64(h.Sum64() & (1<<53 - 1))
	if id == 0 {
		id = 1
	}
	return id
}

// ErrCursorURL is wrapped by the failure of a cursor loop whose cursor
// block names its source with a url option on a worker that does not
// take one (Worker.AllowCursorURL, Config.AllowCursorURL).
var ErrCursorURL = errors.New("a cursor url written in the playbook is off on this worker")

// cursorSpec resolves the cursor's credential and renders its options.
func (w *Worker) cursorSpec(ctx context.Context, cmd *Command, lp *dsl.Loop, fs dsl.FrameSpec, scope map[string]any, driver cursor.Driver) (cursor.Spec, error) {
	cs := lp.Cursor
	spec := cursor.Spec{
		Kind: cs.Kind, Claim: cs.Claim, Scope: scope, LoopID: cmd.loopKey(), SlotID: cmd.Slot,
		WorkerSlotID: slotID(cmd.ExecutionID, cmd.Run, cmd.Slot),
		Lease:        time.Duration(fs.LeaseSeconds * float64(time.Second)),
		MaxAttempts:  max(1, fs.MaxAttempts), Logger: w.logger(),
	}
	if cs.MaxAttempts > 0 {
		spec.MaxAttempts = cs.MaxAttempts
	}
	if cs.Auth != nil {
		a, err := cs.Auth.Render(scope)
		if err != nil {
			return spec, fmt.Errorf("loop.cursor.auth: %w", err)
		}
		spec.Auth = fmt.Sprint(a)
	}
	var perCall []string
	if t, ok := driver.(cursor.TemplateOptioner); ok {
		perCall = t.TemplateOptions()
	}
	opts := make(map[string]any, len(cs.Options))
	for _, k := range sortedKeys(cs.Options) {
		if slices.Contains(perCall, k) {
			// The driver renders these per call with its own variables.
			opts[k] = cs.Options[k].Raw()
			continue
		}
		x, err := cs.Options[k].Render(scope)
		if err != nil {
			return spec, fmt.Errorf("loop.cursor.%s: %w", k, err)
		}
		opts[k] = x
	}
	spec.Options = opts
	if _, ok := opts["url"]; ok && !w.AllowCursorURL {
		// A url written in the playbook is a source the keychain never
		// vetted, reached with this process's own rights: any file it can
		// open (sqlite), and the credentials its environment holds
		// (PGPASSWORD, ~/.pgpass, AWS_*), sent wherever the url points.
		return spec, fmt.Errorf("loop.cursor.url: %w: name the source with auth: <keychain alias> instead "+
			"(a host that runs only its operator's playbooks sets engine.Config.AllowCursorURL; the example worker, --allow-code)", ErrCursorURL)
	}
	if spec.Auth != "" {
		if w.Keychain == nil {
			return spec, fmt.Errorf("loop.cursor.auth: no keychain to resolve credential %q", spec.Auth)
		}
		cred, err := w.keychain(ctx).Resolve(ctx, spec.Auth)
		if err != nil {
			return spec, fmt.Errorf("loop.cursor.auth: %w", err)
		}
		spec.Credential = cred.URL
	} else if u, ok := opts["url"].(string); ok {
		spec.Credential = u
	}
	return spec, nil
}
