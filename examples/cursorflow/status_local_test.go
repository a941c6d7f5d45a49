package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunThenStatusFromEventLog(t *testing.T) {
	dir := t.TempDir()
	pb := filepath.Join(dir, "flow.yaml")
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: tiny}
workload: {n: 2}
workflow:
  - step: start
    loop:
      in: '{{ range(n) | list }}'
      iterator: i
    tool: {kind: noop, i: '{{ iter.i }}'}
`
	if err := os.WriteFile(pb, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	logURL := "sqlite:" + filepath.Join(dir, "events.db")
	var out, errOut bytes.Buffer
	if code := dispatch([]string{"run", pb, "--set", "n=3", "--eventlog", logURL}, &out, &errOut); code != exitOK {
		t.Fatalf("run exited %d: %s %s", code, out.String(), errOut.String())
	}
	id := strings.TrimPrefix(strings.SplitN(out.String(), "\n", 2)[0], "execution ")
	out.Reset()
	if code := dispatch([]string{"status", id, "--eventlog", logURL}, &out, &errOut); code != exitOK {
		t.Fatalf("status exited %d: %s", code, errOut.String())
	}
	var st struct {
		Status string `json:"status"`
		Loops  map[string]struct {
			Items int `json:"items"`
			Done  int `json:"done"`
		} `json:"loops"`
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("status output is not JSON: %v\n%s", err, out.String())
	}
	if st.Status != "completed" || st.Loops["start#1"].Items != 3 || st.Loops["start#1"].Done != 3 {
		t.Fatalf("status = %+v", st)
	}
	// --json, which status --server takes, is accepted against a log too:
	// the same status, on one line.
	out.Reset()
	if code := dispatch([]string{"status", id, "--eventlog", logURL, "--json"}, &out, &errOut); code != exitOK {
		t.Fatalf("status --json exited %d: %s", code, errOut.String())
	}
	if lines := strings.Count(strings.TrimSpace(out.String()), "\n"); lines != 0 {
		t.Fatalf("status --json printed %d lines, want one:\n%s", lines+1, out.String())
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.Status != "completed" {
		t.Fatalf("status --json = %+v (%v)\n%s", st, err, out.String())
	}
	if code := dispatch([]string{"status", "no-such-execution", "--eventlog", logURL}, &out, &errOut); code != exitInvalid {
		t.Fatalf("status of an unknown execution exited %d, want %d", code, exitInvalid)
	}
}
