// Command cursorflow works with NoETL v2 playbooks from the command line.
//
// Usage:
//
//	cursorflow validate [-v] FILE...
//	cursorflow run FILE [--set key=value]... [--credential alias=URL]... [--eventlog URL] [--json]
//	cursorflow resume EXECUTION_ID [--eventlog URL] [--credential alias=URL]... [--json]
//
// validate parses and validates each playbook and prints "ok FILE" for a
// valid one or one "FILE:LINE:COL: message" line per problem. With -v it
// also prints warnings (unknown keys and the like) as
// "FILE:LINE:COL: warning: message". It exits 0 when every file is valid,
// 1 when some are not and 2 on a usage error.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes shared by every subcommand.
const (
	exitOK      = 0 // success
	exitInvalid = 1 // the command ran and found a problem (or failed)
	exitUsage   = 2 // bad command line
)

// dispatch runs the subcommand named by args[0]. Each subcommand is a
// func(args []string, stdout, stderr io.Writer) int in its own file; add a
// case here (and a line to usage) for a new one.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "run":
		return cmdRun(args[1:], stdout, stderr)
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
`)
}
