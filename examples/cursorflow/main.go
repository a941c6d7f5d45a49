// Command cursorflow works with NoETL v2 playbooks from the command line.
//
// Usage:
//
//	cursorflow validate [-v] FILE...
//	cursorflow run FILE [--set key=value]... [--credential alias=URL]... [--eventlog URL] [--result-store URL] [--result-threshold BYTES] [--json] [--progress MODE] [--no-code]
//	cursorflow resume EXECUTION_ID [--eventlog URL] [--result-store URL] [--result-threshold BYTES] [--credential alias=URL]... [--json] [--progress MODE] [--no-code]
//	cursorflow run FILE --server URL [--token TOKEN] [--set key=value]... [--json] [-v] [--progress MODE]
//	cursorflow status EXECUTION_ID --server URL [--token TOKEN] [--json]
//	cursorflow status EXECUTION_ID --eventlog URL [--json]
//	cursorflow events EXECUTION_ID --server URL [--token TOKEN] [--follow] [--after SEQ] [--json]
//	cursorflow events EXECUTION_ID --eventlog URL [--follow] [--after SEQ] [--json]
//	cursorflow cancel EXECUTION_ID --server URL [--token TOKEN] [--json]
//
// validate parses and validates each playbook and prints "ok FILE" for a
// valid one or one "FILE:LINE:COL: message" line per problem (unknown keys
// and refused fields among them, as run refuses them). It also prints
// warnings (tool or cursor kinds this build does not register, lint) as
// "FILE:LINE:COL: warning: message", which leave the file ok; with -v,
// notes on the fields it takes as hints too. It exits 0 when every file is
// valid, 1 when some are not and 2 on a usage error.
//
// run and resume keep results larger than --result-threshold bytes
// (default 64 KiB) in a result store, --result-store: a directory
// (file:///DIR, by default under the user's state directory beside the
// default event log), an S3 bucket (s3://BUCKET?region=...&endpoint=...,
// credentials from the AWS environment) or mem://; the event log holds a
// reference to each. resume must see the store run used. --result-store
// inline keeps every result in the event log.
//
// run and resume wait out an event log that fails to record (a full
// disk, a file gone read-only, a server restarting), saying once on stderr
// which log failed and why; interrupted meanwhile, they exit 130 with the
// resume command to run once it answers.
//
// run and resume lock their execution while the process lives (a file
// lock beside a SQLite log, an advisory lock on a PostgreSQL log's
// server): a resume of an execution another process still drives exits 1.
// Interrupted (SIGINT, SIGTERM) with a log that outlives the process, they
// let the running commands finish for up to 30s and record them before
// exiting 130 with the resume command to run; a second interrupt stops them
// at once (a cursor frame then still hands back and records its unstarted
// rows).
//
// On a terminal, run and resume draw live progress on stderr while the
// execution runs: one line for the execution (status, elapsed, events,
// commands in flight) and one per running loop (rows done, failed and
// dead, rate, frames in flight, elapsed), erased before the summary. They
// stay quiet when stderr is not a terminal, with --json, or with -v (whose
// log lines would be overdrawn); --progress always|never overrides.
//
// With --server URL, run starts the execution on a cursorflow server
// instead of in this process and follows its events until it ends (exit 0
// completed, 1 otherwise, 2 on a usage error or an invalid playbook). Like
// a local run it ends with a line for each cursor loop whose rows failed
// or went to the dead letter, read from the server's status. With
// --json, stdout holds only the final summary object and the execution id
// goes to stderr as soon as the server answers.
// A local run or resume executes the playbook's python, shell and duckdb
// steps on this machine, with this user's rights (the playbook is the
// operator's own); --no-code turns those tools off. Servers' workers keep them off
// unless started with --allow-code.
//
// status, events and cancel talk to a server: --server or
// $CURSORFLOW_SERVER; status with --eventlog instead folds the execution
// straight from that event log, and so does events with --eventlog. A
// command's partial results (call.partial: output lines, row batches,
// streamed records) show in events as they are recorded. The bearer token
// comes from --token, $CURSORFLOW_TOKEN or else $CURSORFLOW_API_TOKEN (the
// name the server reads its token from), trimmed of surrounding white
// space.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/cursorflow/cursorflow/examples/internal/liblog"
)

func main() {
	// go-redis and the MySQL driver log through package-level loggers:
	// route them through the run's logger (withEngine sets it), at debug
	// level.
	liblog.Install()
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes shared by every subcommand.
const (
	exitOK      = 0 // success
	exitInvalid = 1 // the command ran and found a problem (or failed)
	exitUsage   = 2 // bad command line
	// exitInterrupted: a run or resume stopped by SIGINT or SIGTERM (128
	// plus SIGINT's number, as shells report it); its execution is
	// unfinished in the log, for resume.
	exitInterrupted = 130
)

// dispatch runs the subcommand named by args[0]. Each subcommand is a
// func(args []string, stdout, stderr io.Writer) int in its own file; add a
// case here (and a line to usage) for a new one.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if _, isFile := stderr.(*os.File); !isFile {
		stderr = &lockedWriter{w: stderr}
	}
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "run":
		if hasServerFlag(args[1:]) {
			return cmdRunRemote(args[1:], stdout, stderr)
		}
		return cmdRun(args[1:], stdout, stderr)
	case "status":
		if hasEventLogFlag(args[1:]) && !hasServerFlag(args[1:]) {
			return cmdStatusLocal(args[1:], stdout, stderr)
		}
		return cmdStatus(args[1:], stdout, stderr)
	case "events":
		if hasEventLogFlag(args[1:]) && !hasServerFlag(args[1:]) {
			return cmdEventsLocal(args[1:], stdout, stderr)
		}
		return cmdEvents(args[1:], stdout, stderr)
	case "cancel":
		return cmdCancel(args[1:], stdout, stderr)
	case "resume":
		return cmdResume(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	default:
		fmt.Fprintf(stderr, "cursorflow: unknown command %q\n", args[0])
		usage(stderr)
		return exitUsage
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: cursorflow <command> [arguments]

commands:
  validate [-v] FILE...   check playbooks; print ok or file:line:col problems
  run FILE [flags]        run a playbook in this process until it ends
  resume EXECUTION_ID     continue an execution an earlier process left unfinished
                          (both run python, shell and duckdb steps here; --no-code turns them off)

on a server (--server URL, for status/events/cancel also $CURSORFLOW_SERVER;
--token TOKEN, $CURSORFLOW_TOKEN or the server's $CURSORFLOW_API_TOKEN):
  run FILE --server URL   start the playbook on the server and follow it until it ends
  status EXECUTION_ID     print an execution's status per step and loop
                          (--eventlog URL reads a local event log instead)
  events EXECUTION_ID     print its events; --follow streams them until it ends
                          (--eventlog URL reads a local event log instead)
  cancel EXECUTION_ID     ask a running execution to stop
`)
}
