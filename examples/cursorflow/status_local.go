package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/eventlogurl"
)

// hasEventLogFlag reports whether args name an event log, which makes
// status read it directly instead of asking a server.
func hasEventLogFlag(args []string) bool {
	for _, a := range args {
		if a == "--eventlog" || a == "-eventlog" || strings.HasPrefix(a, "--eventlog=") || strings.HasPrefix(a, "-eventlog=") {
			return true
		}
	}
	return false
}

// cmdStatusLocal prints an execution's status read straight from an
// event log: cursorflow status EXECUTION_ID --eventlog URL [--json].
func cmdStatusLocal(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	logURL := fs.String("eventlog", "", "event log to read: sqlite:PATH, postgres://... ")
	// The output is JSON either way; --json, which status --server takes,
	// is accepted too (one line, as there), so a script that passes it
	// works against a server and a log alike.
	oneLine := fs.Bool("json", false, "print the JSON on one line")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) != 1 || *logURL == "" {
		fmt.Fprintln(stderr, "usage: cursorflow status EXECUTION_ID --eventlog URL [--json]")
		return exitUsage
	}
	ctx := context.Background()
	log, err := openReadLog(ctx, *logURL, stderr)
	if err != nil {
		return exitInvalid
	}
	defer log.Close()
	// The projection continues from the execution's latest snapshot in the
	// log (saved by the run's projection), so a long history is not folded
	// again on every call. It saves none: status only reads the log.
	plog := log
	if snaps, ok := log.(eventlog.Snapshots); ok {
		plog = loadOnly{Log: log, snaps: snaps}
	}
	proj, err := engine.NewProjection(engine.ProjectionConfig{Log: plog})
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitInvalid
	}
	st, err := proj.Status(ctx, pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: %v\n", err)
		return exitInvalid
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	if *oneLine {
		b, _ = json.Marshal(st)
	}
	fmt.Fprintln(stdout, string(b))
	return exitOK
}

// cmdEventsLocal prints an execution's events read straight from an
// event log: cursorflow events EXECUTION_ID --eventlog URL [--follow]
// [--after SEQ] [--json]. With --follow it waits for new events (call.partial
// results while a command runs among them) until the execution ends.
func cmdEventsLocal(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	logURL := fs.String("eventlog", "", "event log to read: sqlite:PATH, postgres://... ")
	follow := fs.Bool("follow", false, "keep printing new events until the execution ends")
	after := fs.Int64("after", 0, "start after this event seq")
	asJSON := fs.Bool("json", false, "print each event as a JSON line")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) != 1 || *logURL == "" {
		fmt.Fprintln(stderr, "usage: cursorflow events EXECUTION_ID --eventlog URL [--follow] [--after SEQ] [--json]")
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	log, err := openReadLog(ctx, *logURL, stderr)
	if err != nil {
		return exitInvalid
	}
	defer log.Close()
	emit := func(ev eventlog.Event) {
		if *asJSON {
			b, _ := json.Marshal(ev)
			fmt.Fprintln(stdout, string(b))
		} else {
			printEvent(stdout, ev)
		}
	}
	return printLocalEvents(ctx, log, pos[0], *after, *follow, eventlogurl.Redact(*logURL), emit, stderr)
}

// printLocalEvents emits the events of id after seq after, read from log
// (named logName in messages); with follow, until the execution ends.
// Following, a read or wait that fails (a dropped connection, a database
// restarting) is tried again with backoff until it answers or ctx ends,
// as run --server rides out a server that does not answer: the execution
// goes on without its reader.
func printLocalEvents(ctx context.Context, log eventlog.Log, id string, after int64, follow bool, logName string,
	emit func(eventlog.Event), stderr io.Writer,
) int {
	next, failing, backoff := after, false, followMinBackoff
	retry := func(err error) bool {
		if !follow || ctx.Err() != nil || errors.Is(err, eventlog.ErrClosed) {
			return false
		}
		if !failing {
			fmt.Fprintf(stderr, "cursorflow: %v; trying again until the event log answers\n", err)
			failing = true
		}
		t := time.NewTimer(backoff)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		backoff = min(backoff*2, followMaxBackoff)
		return true
	}
	answered := func() {
		if failing {
			fmt.Fprintln(stderr, "cursorflow: the event log answers again")
			failing, backoff = false, followMinBackoff
		}
	}
	for {
		evs, err := log.Read(ctx, id, next, eventsPage)
		if err != nil {
			if retry(err) {
				continue
			}
			if follow && ctx.Err() != nil {
				return exitOK // interrupted
			}
			fmt.Fprintf(stderr, "cursorflow: %v\n", err)
			return exitInvalid
		}
		answered()
		for _, ev := range evs {
			emit(ev)
			next = ev.Seq
			if eventlog.IsTerminal(ev.Type) {
				return exitOK
			}
		}
		if len(evs) == eventsPage {
			continue
		}
		if next == 0 && len(evs) == 0 {
			fmt.Fprintf(stderr, "cursorflow: execution %s has no events in %s (check --eventlog)\n", id, logName)
			return exitInvalid
		}
		if !follow {
			return exitOK
		}
		if err := log.Wait(ctx, id, next); err != nil {
			if retry(err) {
				continue
			}
			if ctx.Err() != nil {
				return exitOK // interrupted
			}
			fmt.Fprintf(stderr, "cursorflow: %v\n", err)
			return exitInvalid
		}
	}
}

// Backoff of a follow whose event log does not answer.
const (
	followMinBackoff = 100 * time.Millisecond
	followMaxBackoff = 5 * time.Second
)

// eventsPage is how many events one read of a local log returns.
const eventsPage = 1000

// openReadLog opens the log a reader (status, events) names, which must
// be there already, for reading only: a reader has nothing to write, and
// a log that cannot be written to (a full disk, a file system gone
// read-only) is when a user most wants to look at it. It prints what
// went wrong.
func openReadLog(ctx context.Context, logURL string, stderr io.Writer) (eventlog.Log, error) {
	log, err := eventlogurl.OpenReadOnly(ctx, logURL)
	sayOpenFailed(logURL, err, stderr)
	return log, err
}

// openExistingLog opens the log a resume names, which must be there
// already: a mistyped path or database is said, not created. It prints
// what went wrong.
func openExistingLog(ctx context.Context, logURL string, stderr io.Writer) (eventlog.Log, error) {
	log, err := eventlogurl.OpenExisting(ctx, logURL)
	sayOpenFailed(logURL, err, stderr)
	return log, err
}

// sayOpenFailed prints err, the failure to open the log at logURL, if any.
func sayOpenFailed(logURL string, err error, stderr io.Writer) {
	switch {
	case errors.Is(err, eventlog.ErrNoLog):
		fmt.Fprintf(stderr, "cursorflow: no event log at %s (check --eventlog)\n", eventlogurl.Redact(logURL))
	case err != nil:
		fmt.Fprintf(stderr, "cursorflow: event log: %v\n", err)
	}
}

// loadOnly is a log whose snapshots a projection loads but never saves.
type loadOnly struct {
	eventlog.Log
	snaps eventlog.Snapshots
}

func (l loadOnly) LoadSnapshot(ctx context.Context, executionID, format string) (eventlog.Snapshot, error) {
	return l.snaps.LoadSnapshot(ctx, executionID, format)
}

// SaveSnapshot saves nothing; (false, nil) tells the projection not to
// try again at this seq.
func (loadOnly) SaveSnapshot(context.Context, eventlog.Snapshot) (bool, error) { return false, nil }
