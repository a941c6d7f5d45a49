package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/cursorflow/cursorflow/engine"
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
// event log: cursorflow status EXECUTION_ID --eventlog URL.
func cmdStatusLocal(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	logURL := fs.String("eventlog", "", "event log to read: sqlite:PATH, postgres://... ")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) != 1 || *logURL == "" {
		fmt.Fprintln(stderr, "usage: cursorflow status EXECUTION_ID --eventlog URL")
		return exitUsage
	}
	ctx := context.Background()
	log, err := eventlogurl.Open(ctx, *logURL)
	if err != nil {
		fmt.Fprintf(stderr, "cursorflow: event log: %v\n", err)
		return exitUsage
	}
	defer log.Close()
	// The projection continues from the execution's latest snapshot in the
	// log (saved by earlier readers), so a long history is not folded
	// again on every call.
	proj, err := engine.NewProjection(engine.ProjectionConfig{Log: log})
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
	fmt.Fprintln(stdout, string(b))
	return exitOK
}
