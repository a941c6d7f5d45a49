package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/eventlogurl"
	"github.com/cursorflow/cursorflow/examples/internal/credflag"
	"github.com/cursorflow/cursorflow/examples/internal/liblog"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/playbook"
)

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// runFlags are the flags run and resume share.
type runFlags struct {
	sets        multiFlag
	credentials multiFlag
	eventlog    string
	json        bool
	workers     int
	verbose     bool
	progress    string
	noCode      bool
	resultStore string
	threshold   int64
}

// logURL is --eventlog, or the default log under the user's state
// directory.
func (f runFlags) logURL() string {
	if f.eventlog == "" {
		return defaultEventLog()
	}
	return f.eventlog
}

func (f *runFlags) register(fs *flag.FlagSet, withSet bool) {
	if withSet {
		fs.Var(&f.sets, "set", "override a workload key: key=value (a YAML number, bool, null, quoted string or flow [list]/{map}, else the text as given; a dotted key such as config.limit sets a key inside a workload mapping); repeatable")
	}
	fs.Var(&f.credentials, "credential", "map a keychain alias (letters, digits, _ - .) to a connection URL: "+credflag.Form+" as in CURSORFLOW_CREDENTIAL_<ALIAS>; repeatable")
	fs.StringVar(&f.eventlog, "eventlog", "", "event log: sqlite:PATH (default under the user's state directory), postgres://... or memory:")
	fs.BoolVar(&f.json, "json", false, "end with one JSON summary object")
	fs.IntVar(&f.workers, "workers", engine.DefaultWorkers, "in-process workers")
	fs.BoolVar(&f.verbose, "v", false, "log engine activity to stderr")
	fs.StringVar(&f.progress, "progress", progressAuto, "live progress on stderr: auto (on a terminal, without --json or -v), always or never")
	fs.BoolVar(&f.noCode, "no-code", false, "turn off the python, shell and duckdb tools, which otherwise run the playbook's code and touch files on this machine, and cursor url: options (a cursor then names its source with auth:)")
	fs.StringVar(&f.resultStore, "result-store", "", "where results over --result-threshold go: file:///DIR (default under the user's state directory), s3://BUCKET?..., mem://, or inline (keep them in the event log)")
	fs.Int64Var(&f.threshold, "result-threshold", resultstore.DefaultThreshold, "results larger than this many bytes (JSON) go to the result store")
}

// parseInterleaved parses flags that may come before or after positional
// arguments (cursorflow run FILE --set a=1).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// stateDir is where the CLI keeps its defaults: the event log and the
// result store.
func stateDir() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".local", "state")
		} else {
			dir = os.TempDir()
		}
	}
	return filepath.Join(dir, "cursorflow")
}

func defaultEventLog() string {
	return "sqlite:" + filepath.Join(stateDir(), "events.db")
}

// resultStoreInline is the --result-store value that keeps results in the
// event log.
const resultStoreInline = "inline"

func defaultResultStore() string {
	return "file://" + filepath.ToSlash(filepath.Join(stateDir(), "results"))
}

// openResultStore opens --result-store (nil for inline).
func openResultStore(ctx context.Context, raw string, threshold int64) (*resultstore.Store, error) {
	if raw == resultStoreInline {
		return nil, nil
	}
	if raw == "" {
		raw = defaultResultStore()
	}
	if threshold <= 0 {
		return nil, fmt.Errorf("--result-threshold %d: want a positive byte count", threshold)
	}
	return resultstoreurl.Open(ctx, raw, threshold)
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runFlags
	f.register(fs, true)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cursorflow run FILE [flags]                     (runs here; flags below)")
		fmt.Fprintln(stderr, "   or: cursorflow run FILE --server URL [--token TOKEN] [--set key=value]... [--json] [-v] [--progress auto|always|never]")
		fmt.Fprintln(stderr, "                                                       (runs on a server; its token also from CURSORFLOW_TOKEN)")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: cursorflow run FILE [--set key=value]... [--credential alias=URL]... [--eventlog URL] [--result-store URL] [--result-threshold BYTES] [--json] [--progress auto|always|never]")
		return exitUsage
	}
	file := pos[0]
	src, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitUsage
	}
	pb, err := dsl.Parse(file, src)
	if err != nil {
		var list dsl.ErrorList
		if errors.As(err, &list) {
			for _, d := range list {
				fmt.Fprintln(stderr, d.Error())
			}
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", file, err)
		}
		return exitUsage
	}
	workload, err := parseSets(f.sets, pb.Workload)
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitUsage
	}
	for _, w := range setWarnings(f.sets, pb.Workload) {
		fmt.Fprintf(stderr, "cursorflow: warning: %s\n", w)
	}
	// The id is chosen here so that the execution is locked (see
	// lockExecution) before it starts.
	u, err := uuid.NewV7()
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitInvalid
	}
	id := u.String()
	return withEngine(f, stdout, stderr, id, pb, func(ctx context.Context, e *engine.Engine, log eventlog.Log) (string, error) {
		start := func() error {
			_, err := e.Start(ctx, src, engine.StartOptions{File: file, Workload: workload, ExecutionID: id})
			return err
		}
		err := startRecorded(ctx, log, id, start, stderr)
		if err != nil && errors.Is(err, engine.ErrUnavailable) {
			err = fmt.Errorf("%w (if it does, resume with: %s)", err, resumeHint(id, f.logURL(), f.credentials))
		}
		return id, err
	})
}

func cmdResume(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runFlags
	f.register(fs, false)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: cursorflow resume EXECUTION_ID [--eventlog URL] [--result-store URL] [--result-threshold BYTES] [--credential alias=URL]... [--json]")
		return exitUsage
	}
	id := pos[0]
	return withEngine(f, stdout, stderr, id, nil, func(ctx context.Context, e *engine.Engine, _ eventlog.Log) (string, error) {
		err := resumeRecorded(ctx, id, func() error { return e.Resume(ctx, id) }, stderr)
		if err != nil && errors.Is(err, engine.ErrUnavailable) {
			err = fmt.Errorf("%w (%s is unfinished in the log: resume again once it answers: %s)", err, id, resumeHint(id, f.logURL(), f.credentials))
		}
		if errors.Is(err, engine.ErrUnknownExecution) {
			err = fmt.Errorf("%w, in the event log %s (check --eventlog)", err, eventlogurl.Redact(f.logURL()))
		}
		return id, err
	})
}

// askBackoff bounds the pause between two asks of a start or a resume the
// event log failed (see untilRecorded).
const askBackoff = 5 * time.Second

// untilRecorded calls ask, the engine's start or resume (what) of execution
// id, until ask says it need not be asked again, pausing with backoff in
// between, for as long as ctx lives. The wait is said once on stderr,
// with the error of the first ask that failed. stopped reports that ctx
// ended while ask was to be asked again; err is the last ask's.
func untilRecorded(ctx context.Context, what, id string, stderr io.Writer, ask func() (again bool, err error)) (stopped bool, err error) {
	backoff, said := 100*time.Millisecond, false
	for {
		again, err := ask()
		if !again || ctx.Err() != nil {
			return false, err
		}
		if !said {
			fmt.Fprintf(stderr, "cursorflow: the event log failed while recording the %s of %s (%v); asking it again until it answers\n", what, id, err)
			said = true
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return true, err
		case <-t.C:
		}
		backoff = min(2*backoff, askBackoff)
	}
}

// startRecorded runs start, the engine's Start of execution id, until the
// event log records it. An append the log failed (engine.ErrUnavailable:
// a connection cut, a server restarting) may have been stored all the
// same, its answer lost; the engine then loads the execution from the
// log and drives it. So a failed start is asked again, with backoff, for
// as long as ctx lives (a run waits out a log that stops answering
// mid-run the same way): a start refused as existing is the first one on
// record once the log holds the execution's events, and still being
// sorted out by the engine otherwise. The wait is said once on stderr.
// The returned error wraps engine.ErrUnavailable when the run was stopped
// while the log had not answered.
func startRecorded(ctx context.Context, log eventlog.Log, id string, start func() error, stderr io.Writer) error {
	asked := false
	stopped, err := untilRecorded(ctx, "start", id, stderr, func() (bool, error) {
		err := start()
		switch {
		case err == nil:
			return false, nil
		case asked && errors.Is(err, engine.ErrExecutionExists):
			if evs, rerr := log.Read(ctx, id, 0, 1); rerr == nil && len(evs) > 0 {
				return false, nil
			}
		case errors.Is(err, engine.ErrClosed) || ctx.Err() != nil:
			return false, err
		case !asked && !errors.Is(err, engine.ErrUnavailable):
			// Refused before anything was sent to the log. Once the log
			// failed, the playbook is the one Start took: what fails
			// now is the log again (Start's read of it, say).
			return false, err
		}
		asked = true
		return true, err
	})
	if stopped {
		return fmt.Errorf("the event log did not record the start of %s before the run was stopped (%w): the log may hold it all the same: %w: %w", id, context.Cause(ctx), engine.ErrUnavailable, err)
	}
	return err
}

// resumeRecorded runs resume, the engine's Resume of execution id, until
// the event log records what it decides: a log that fails the resume's
// first append (a full disk, a file gone read-only, a server restarting:
// engine.ErrUnavailable) is asked again with backoff for as long as ctx
// lives, as run waits out its start and the engine a log that fails
// mid-run. The engine drives the execution from the log once an append
// failed, and a Resume of an execution it drives is answered at once, so
// asking again is safe. The wait is said once on stderr.
func resumeRecorded(ctx context.Context, id string, resume func() error, stderr io.Writer) error {
	stopped, err := untilRecorded(ctx, "resume", id, stderr, func() (bool, error) {
		err := resume()
		return err != nil && errors.Is(err, engine.ErrUnavailable) && !errors.Is(err, engine.ErrClosed), err
	})
	if stopped {
		return fmt.Errorf("the event log did not record the resume of %s before it was stopped (%w): %w", id, context.Cause(ctx), err)
	}
	return err
}

// withEngine opens the event log, locks execution id for this process,
// builds an engine with the standard tools and drivers, checks that the
// keychain holds every credential pb names (for a resume, nil: the
// playbook the execution recorded), starts (or resumes) the execution
// with begin, waits for it and prints the outcome.
func withEngine(f runFlags, stdout, stderr io.Writer, id string, pb *dsl.Playbook, begin func(context.Context, *engine.Engine, eventlog.Log) (string, error)) int {
	if !validProgress(f.progress) {
		fmt.Fprintf(stderr, "cursorflow: --progress %q: want auto, always or never\n", f.progress)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	liblog.Use(logger)

	static, err := credflag.Keychain(f.credentials)
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitUsage
	}
	kc := tools.ChainKeychain{static, tools.EnvKeychain{}}

	logURL := f.logURL()
	var log eventlog.Log
	if pb == nil {
		// A resume reads an existing log: a mistyped path or database
		// must not leave a new, empty log behind.
		if log, err = openExistingLog(ctx, logURL, stderr); err != nil {
			return exitInvalid
		}
	} else {
		if path, ok := strings.CutPrefix(logURL, "sqlite:"); ok {
			_ = os.MkdirAll(filepath.Dir(strings.TrimPrefix(path, "//")), 0o755)
		}
		if log, err = eventlogurl.Open(ctx, logURL); err != nil {
			fmt.Fprintf(stderr, "cursorflow: event log: %v\n", err)
			// A URL of no backend is a bad command line; a log that
			// cannot be reached now (a database down, refusing) is a
			// failure, as it is for resume, not a playbook to fix.
			if errors.Is(err, eventlogurl.ErrUnsupportedURL) {
				return exitUsage
			}
			return exitInvalid
		}
	}
	defer log.Close()
	lock, err := lockExecution(ctx, logURL, log, id, logger)
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitInvalid
	}
	defer lock.release()
	// A lock lost to another process stops this one: two orchestrators
	// would each decide for the execution.
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	go func() {
		select {
		case err := <-lock.lost:
			stopRun(err)
		case <-ctx.Done():
		}
	}()

	results, err := openResultStore(ctx, f.resultStore, f.threshold)
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: result store: %v\n", err)
		return exitUsage
	}
	if results != nil {
		defer results.Close()
	}

	// A local run executes the operator's own playbook, so its code tools
	// and cursor urls (a sqlite path, postgres://... with the
	// environment's password) are on unless --no-code; the server's
	// workers keep them off.
	treg, creg, closer := stdwire.Registries(kc, logger, !f.noCode)
	defer closer.Close()
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Workers: f.workers, Logger: logger, Results: results,
		AllowCursorURL: !f.noCode})
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitUsage
	}
	defer e.Close()
	_ = treg.Register("playbook", playbook.New(e))
	if pb != nil {
		// A run (not a resume) says what validate would warn about.
		printWarnings(stderr, pb, pb.File, treg, creg)
	}

	// Progress and the final event count read a projection of the log:
	// each look folds only what was appended since the last one.
	proj, err := engine.NewProjection(engine.ProjectionConfig{Log: log, Logger: logger})
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitInvalid
	}
	if pb == nil {
		// A resume: the playbook the execution recorded (an unknown id is
		// Resume's to report).
		if file, src, err := proj.Playbook(ctx, id); err == nil {
			pb, _ = dsl.Parse(file, []byte(src))
		}
	}
	if pb != nil {
		// A credential missing here would fail the execution at the step
		// that needs it, for good: refuse before anything runs.
		if problems := engine.CheckCredentials(ctx, pb, treg, kc); len(problems) > 0 {
			for _, d := range problems {
				fmt.Fprintln(stderr, d.Error())
			}
			fmt.Fprintln(stderr, "cursorflow: give each alias with --credential ALIAS=URL or the environment variable "+tools.EnvCredentialPrefix+"<ALIAS>")
			return exitUsage
		}
	}

	started := time.Now()
	id, err = begin(ctx, e, log)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, engine.ErrUnavailable) && !errors.Is(context.Cause(ctx), errLockLost) {
			// Interrupted while waiting out a log that could not record
			// (startRecorded, resumeRecorded): stopped by a signal, its
			// execution unfinished in the log, as one interrupted mid-run.
			fmt.Fprintf(stderr, "cursorflow: %v\n", err)
			return exitInterrupted
		}
		var list dsl.ErrorList
		if errors.Is(err, engine.ErrRecordedPlaybook) {
			// resume: the diagnostics alone would read as a mistake in a
			// file, where it is an execution an earlier release started.
			fmt.Fprintf(stderr, "cursorflow: %v\n", err)
			return exitUsage
		}
		if errors.As(err, &list) {
			for _, d := range list {
				fmt.Fprintln(stderr, d.Error())
			}
			return exitUsage
		}
		var refused *engine.UnsupportedError
		if errors.As(err, &refused) {
			// Refused before anything ran: what this build does not run.
			for i := range refused.Problems {
				fmt.Fprintln(stderr, refused.Problems[i].Error())
			}
			return exitUsage
		}
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitInvalid
	}
	// With --json, stdout holds the summary alone (for jq and friends).
	idOut := stdout
	if f.json {
		idOut = stderr
	}
	fmt.Fprintf(idOut, "execution %s\n", id)
	status := func(ctx context.Context) (*engine.Status, error) { return proj.Status(ctx, id) }
	var stopProgress func()
	if wantProgress(f.progress, f.json || (f.verbose && f.progress == progressAuto), stderr) {
		stopProgress = watchProgress(ctx, stderr, status)
	} else {
		stopProgress = watchHolds(ctx, stderr, status)
	}
	sum, err := e.Wait(ctx, id)
	stopProgress()
	if err != nil {
		if strings.HasPrefix(logURL, "memory:") {
			// The log, and with it the execution, ends with this process:
			// nothing to record for a resume.
			gone := fmt.Sprintf("the in-memory event log is gone with this process, so %s cannot be resumed; run with --eventlog sqlite:PATH or postgres://... to be able to resume", id)
			if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errLockLost) {
				// Interrupted: stopped as on any log, and said so by the
				// exit status scripts read for ^C.
				stopGracefully(e, stderr)
				fmt.Fprintf(stderr, "cursorflow: interrupted (%s)\n", gone)
				return exitInterrupted
			}
			fmt.Fprintf(stderr, "cursorflow: %v (%s)\n", err, gone)
			return exitInvalid
		}
		if cause := context.Cause(ctx); errors.Is(cause, errLockLost) {
			fmt.Fprintf(stderr, "cursorflow: %v\n", cause)
			return exitInvalid
		}
		if ctx.Err() != nil {
			stopGracefully(e, stderr)
			fmt.Fprintf(stderr, "cursorflow: interrupted; %s is unfinished in the log (resume with: %s)\n", id, resumeHint(id, logURL, f.credentials))
			return exitInterrupted
		}
		fmt.Fprintf(stderr, "cursorflow: %v (resume with: %s)\n", err, resumeHint(id, logURL, f.credentials))
		return exitInvalid
	}
	settleChildren(ctx, e, log, id, stderr)
	// The log's view of the execution: its event count (the summary's own
	// covers only what this process saw) and its cursor loops' rows.
	o := outcome{id: sum.ExecutionID, status: sum.Status, steps: sum.Steps, events: sum.Events,
		elapsed: time.Since(started), failedStep: sum.Step, failedField: sum.Field, err: sum.Error,
		whereKey: "eventlog", where: logURL}
	if st, err := proj.Status(ctx, id); err == nil {
		o.events, o.rows = st.Events, cursorRows(st)
	}
	return o.report(stdout, f.json)
}

// childGrace bounds how long a run that ended waits for the sub-playbook
// executions it leaves running to end cancelled.
const childGrace = 10 * time.Second

// settleChildren cancels the sub-playbook executions of id (and theirs)
// still running after id ended, and waits up to childGrace for them to
// end. Nothing awaits them any more: a branch that failed beside them, or
// their step's spec.timeout, ended the parent. The engine cancels them
// itself, but asynchronously, and this process closes the engine next:
// they would stay running in the log, and a resume of one would carry out
// work for a parent that has ended.
func settleChildren(ctx context.Context, e *engine.Engine, log eventlog.Log, id string, stderr io.Writer) {
	unfinished, err := log.Executions(ctx, eventlog.ExecutionsQuery{Unfinished: true})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, childGrace)
	defer cancel()
	for _, child := range unfinished {
		if !strings.HasPrefix(child, id+"/") {
			continue
		}
		// Ended meanwhile, or asked already: either answer will do. One
		// this engine does not drive (left running by a process that died
		// after its parent ended) is resumed, which cancels it.
		if err := e.Cancel(ctx, child); errors.Is(err, engine.ErrUnknownExecution) {
			_ = e.Resume(ctx, child)
		}
		if _, err := e.Wait(ctx, child); err != nil {
			fmt.Fprintf(stderr, "cursorflow: sub-playbook execution %s is unfinished in the log: %v\n", child, err)
		}
	}
}

// outcome is how an execution ended, as run (local or on a server) and
// resume print it.
type outcome struct {
	id, status string
	steps      map[string]string
	events     int64
	elapsed    time.Duration
	// rows are the cursor loops' row outcomes (see cursorRows).
	rows                         map[string]loopRows
	failedStep, failedField, err string
	// whereKey and where say where the execution's events are: "eventlog"
	// and the log's URL, or "server" and the server's. whereKey is both the
	// --json key and the flag `cursorflow events` needs to read them.
	whereKey, where string
}

// report prints the outcome on stdout, as text or as one JSON object, and
// returns run's exit code.
func (o outcome) report(stdout io.Writer, asJSON bool) int {
	if asJSON {
		out := map[string]any{
			"execution_id": o.id, "status": o.status, "steps": o.steps,
			"events": o.events, "seconds": o.elapsed.Seconds(), o.whereKey: o.where,
		}
		if len(o.rows) > 0 {
			out["cursor_loops"] = o.rows
		}
		if o.status == engine.StatusFailed {
			out["failed_step"], out["failed_field"], out["error"] = o.failedStep, o.failedField, o.err
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintf(stdout, "%s in %s (%d events)\n", o.status, o.elapsed.Round(time.Millisecond), o.events)
		for _, run := range slices.Sorted(maps.Keys(o.rows)) {
			// A completed execution may still have rows that failed or
			// went to the dead letter: say so, with where to look.
			// One that did not complete may have handed rows back unrun
			// (a completed one ran them in a later claim).
			r := o.rows[run]
			unrun := 0
			if o.status != engine.StatusCompleted {
				unrun = r.Returned
			}
			if r.Failed > 0 || r.Dead > 0 || r.Abandoned > 0 || r.Unreleased > 0 || unrun > 0 {
				stranded := ""
				if n := r.Abandoned + r.Unreleased; n > 0 {
					stranded = fmt.Sprintf(", %d left claimed in the source", n)
				}
				if unrun > 0 {
					stranded += fmt.Sprintf(", %d handed back unrun", unrun)
				}
				fmt.Fprintf(stdout, "loop %s: %d row runs: %d ok, %d failed, %d dead%s (cursorflow events %s --%s %s)\n",
					run, r.Rows, r.OK, r.Failed, r.Dead, stranded, o.id, o.whereKey, o.where)
			}
		}
		if o.status == engine.StatusFailed {
			fmt.Fprintln(stdout, failureLine(o.failedStep, o.failedField, o.err))
		}
	}
	if o.status != engine.StatusCompleted {
		return exitInvalid
	}
	return exitOK
}

// interruptGrace is how long an interrupted run lets its running commands
// finish.
const interruptGrace = 30 * time.Second

// stopGracefully stops an interrupted run's engine so that what its
// running commands did is on record, the rows a cursor frame hands back
// included: a resume then runs none of them again. A second signal, or
// interruptGrace, cuts the commands short (their unstarted rows are still
// handed back and recorded).
func stopGracefully(e *engine.Engine, stderr io.Writer) {
	fmt.Fprintf(stderr, "cursorflow: interrupted: letting the running commands finish (up to %s; interrupt again to stop now)\n", interruptGrace)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, interruptGrace)
	defer cancel()
	_ = e.Shutdown(ctx)
}

// failureLine says where an execution failed: the step, the field of its
// spec that failed when the failure has one, and the error.
func failureLine(step, field, err string) string {
	step, field, err = printable(step), printable(field), printableText(err)
	if field == "" {
		return fmt.Sprintf("failed at step %s: %s", step, err)
	}
	return fmt.Sprintf("failed at step %s (%s): %s", step, field, err)
}

// loopRows are a cursor loop's row outcomes, as run and resume print them.
type loopRows struct {
	Rows   int `json:"rows"`
	OK     int `json:"ok"`
	Failed int `json:"failed"`
	Dead   int `json:"dead"`
	// Abandoned: rows left claimed in the source (see
	// engine.LoopStatus.Abandoned).
	Abandoned int `json:"abandoned,omitempty"`
	// Unreleased: failed rows left claimed because the cursor has no
	// release statement (see engine.LoopStatus.Unreleased).
	Unreleased int `json:"unreleased,omitempty"`
	// Cancelled: rows a cancel stopped as they ran (see
	// engine.LoopStatus.Cancelled).
	Cancelled int `json:"cancelled,omitempty"`
	// Returned: rows handed back to the source without an outcome (see
	// engine.LoopStatus.Returned).
	Returned int `json:"returned,omitempty"`
}

// cursorRows returns the row outcomes of the execution's cursor loops by
// loop run ("step#n").
func cursorRows(st *engine.Status) map[string]loopRows {
	out := map[string]loopRows{}
	for run, l := range st.Loops {
		if l.Mode == dsl.ModeCursor {
			out[run] = loopRows{Rows: l.Rows, OK: l.OK, Failed: l.Failed, Dead: l.Dead, Abandoned: l.Abandoned, Unreleased: l.Unreleased, Cancelled: l.Cancelled, Returned: l.Returned}
		}
	}
	return out
}

// normalizeYAML turns yaml.v3's decoded values into JSON-friendly ones.
func normalizeYAML(v any) any {
	switch t := v.(type) {
	case int:
		return int64(t)
	case map[string]any:
		for k, x := range t {
			t[k] = normalizeYAML(x)
		}
	case []any:
		for i, x := range t {
			t[i] = normalizeYAML(x)
		}
	}
	return v
}

// resumeHint is the command that resumes execution id: the event log's URL
// without its password and quoted for a shell, and a --credential flag for
// each alias the run was given one for, with a placeholder in place of
// the URL, which may hold a secret and is not printed.
func resumeHint(id, logURL string, credentials []string) string {
	var b strings.Builder
	b.WriteString("cursorflow resume " + shellQuote(id) + " --eventlog " + shellQuote(eventlogurl.Redact(logURL)))
	for _, c := range credentials {
		alias, _, _ := strings.Cut(c, "=")
		b.WriteString(" --credential " + shellQuote(alias+"=<its URL>"))
	}
	return b.String()
}

// shellQuote returns s as one word for a POSIX shell: as it is when it
// holds only characters no shell treats specially, else single-quoted.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@,+%=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// lockedWriter serialises the writes of several goroutines to w: the
// engine's logger and a command's own lines (progress, the start's
// retries) write to stderr from different goroutines. dispatch wraps a
// stderr that is not a file (a test's buffer); a file is left bare, for
// the terminal checks of progress.go.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
