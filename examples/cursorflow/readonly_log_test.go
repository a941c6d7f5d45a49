package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestStatusAndEventsOnAFullDisk: a run filled the disk its SQLite log is
// on and ended. status and events --eventlog, which only read the log,
// could not open it (they opened it for writing, and SQLite could not
// size the -shm file it needs for that: "disk I/O error (4874)"), which
// kept the user from seeing how the run stands just when they need to.
// They now open it read-only and answer, on a full disk and on a file
// system gone read-only alike.
func TestStatusAndEventsOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	disk := testenv.SmallDisk(t, "1m")
	pb := filepath.Join(dir, "flow.yaml")
	if err := os.WriteFile(pb, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: tiny}
workflow:
  - step: start
    tool: {kind: noop}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	logURL := "sqlite:" + filepath.Join(disk, "events.db")
	var out, errOut bytes.Buffer
	if code := dispatch([]string{"run", pb, "--eventlog", logURL}, &out, &errOut); code != exitOK {
		t.Fatalf("run exited %d: %s %s", code, out.String(), errOut.String())
	}
	id := strings.TrimPrefix(strings.SplitN(out.String(), "\n", 2)[0], "execution ")

	testenv.FillDisk(t, filepath.Join(disk, "filler"))
	read := func(when string) {
		t.Helper()
		out.Reset()
		errOut.Reset()
		if code := dispatch([]string{"status", id, "--eventlog", logURL}, &out, &errOut); code != exitOK {
			t.Fatalf("status %s exited %d: %s", when, code, errOut.String())
		}
		var st struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.Status != "completed" {
			t.Fatalf("status %s = %s (%v)", when, out.String(), err)
		}
		out.Reset()
		if code := dispatch([]string{"events", id, "--eventlog", logURL}, &out, &errOut); code != exitOK {
			t.Fatalf("events %s exited %d: %s", when, code, errOut.String())
		}
		if !strings.Contains(out.String(), "execution.completed") {
			t.Fatalf("events %s = %s", when, out.String())
		}
		if errOut.Len() != 0 {
			t.Fatalf("status and events %s said %q", when, errOut.String())
		}
	}
	read("on a full disk")
	testenv.RemountReadOnly(t, disk)
	read("on a read-only file system")
}
