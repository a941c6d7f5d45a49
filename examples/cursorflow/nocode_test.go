package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
)

// TestNoCodeRefusesCodeToolsUpFront: run --no-code refuses a playbook
// with a python step before anything runs (exit 2, naming the step's
// file:line:col and the kind), as it refuses a kind it has no tool for.
// It used to run the steps before the python one and then fail the
// execution at that step, with a hint naming the worker's --allow-code.
func TestNoCodeRefusesCodeToolsUpFront(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, "code.yaml", `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: code}
workflow:
  - step: start
    tool: {kind: noop}
    next: [py]
  - step: py
    tool:
      kind: python
      code: 'result = 1'
`)
	logPath := filepath.Join(dir, "events.db")
	code, out, errOut := cli("run", file, "--no-code", "--eventlog", "sqlite:"+logPath)
	if code != exitUsage || !strings.Contains(errOut, file+":10:7") || !strings.Contains(errOut, `"python"`) {
		t.Fatalf("run --no-code: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	ctx := context.Background()
	log, err := sqlite.Open(ctx, logPath, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	ids, err := log.Executions(ctx, eventlog.ExecutionsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 0 {
		t.Fatalf("the refused run recorded executions %v", ids)
	}
}
