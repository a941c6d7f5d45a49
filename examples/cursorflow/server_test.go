package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/apitest"
)

const remoteToken = "cli-test-token"

// startRemote starts a cursorflow API server on a real in-process engine
// (see apitest.Server for its echo and gate tools).
func startRemote(t *testing.T) *apitest.Server {
	t.Helper()
	return apitest.Start(t, apitest.Config{Token: remoteToken})
}

func cli(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = dispatch(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

const remotePlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: remote}
workload: {msg: hello}
workflow:
  - step: start
    tool: {kind: echo, msg: '{{ msg }}'}
`

const gatedRemotePlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: gated}
workflow:
  - step: start
    tool: {kind: gate}
`

// executionID pulls the id out of run's first line.
func executionID(t *testing.T, stdout string) string {
	t.Helper()
	first, _, _ := strings.Cut(stdout, "\n")
	id, ok := strings.CutPrefix(first, "execution ")
	if !ok || id == "" {
		t.Fatalf("no execution line in %q", stdout)
	}
	return id
}

func TestRemoteRun(t *testing.T) {
	t.Parallel()
	r := startRemote(t)
	file := writeFile(t, "remote.yaml", remotePlaybook)

	code, out, errOut := cli("run", file, "--server", r.URL(), "--token", remoteToken, "--set", "msg=42", "-v")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	id := executionID(t, out)
	if !strings.Contains(out, "completed in ") {
		t.Errorf("stdout %q", out)
	}
	if !strings.Contains(errOut, "execution.completed") || !strings.Contains(errOut, "command.issued") {
		t.Errorf("-v did not print events: %q", errOut)
	}
	if got := r.Seen(); len(got) != 1 || got[0] != "42" {
		t.Fatalf("tool saw %q, want the --set override", got)
	}
	st, err := engine.Inspect(context.Background(), r.Log, id)
	if err != nil || st.Status != engine.StatusCompleted {
		t.Fatalf("server status %v %v", st, err)
	}

	// --json: one summary object.
	code, out, errOut = cli("run", "--server="+r.URL(), "--token", remoteToken, "--json", file)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var sum map[string]any
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum["status"] != "completed" {
		t.Fatalf("--json output %q: %v", out, err)
	}
	// The id went to stderr as soon as the server answered.
	if id, _ := sum["execution_id"].(string); id == "" || !strings.Contains(errOut, "execution "+id+"\n") {
		t.Fatalf("--json: stderr %q lacks the execution id %v", errOut, sum["execution_id"])
	}

	// A failing execution exits 1 and says where it failed.
	failing := writeFile(t, "fail.yaml", remotePlaybook)
	code, out, _ = cli("run", failing, "--server", r.URL(), "--token", remoteToken, "--set", "msg=fail")
	if code != exitInvalid || !strings.Contains(out, "failed at step start") {
		t.Fatalf("failing run: exit %d, stdout %q", code, out)
	}

	// An invalid playbook exits 2 with the server's positions.
	bad := writeFile(t, "bad.yaml", invalidPlaybook)
	code, _, errOut = cli("run", bad, "--server", r.URL(), "--token", remoteToken)
	if code != exitUsage || !strings.Contains(errOut, bad+":5:5: step start: tool is required") {
		t.Fatalf("invalid playbook: exit %d, stderr %q", code, errOut)
	}
}

// TestRemoteTokenFromServerVariable: with $CURSORFLOW_TOKEN unset, the
// CLI reads the server's $CURSORFLOW_API_TOKEN, trimmed like the server
// trims it (a trailing newline used to make every request fail).
func TestRemoteTokenFromServerVariable(t *testing.T) {
	r := startRemote(t)
	file := writeFile(t, "remote.yaml", remotePlaybook)
	t.Setenv(envToken, "")
	t.Setenv(envAPIToken, remoteToken+"\n")
	if code, _, errOut := cli("run", file, "--server", r.URL(), "--progress", "never"); code != exitOK {
		t.Fatalf("token from $%s: exit %d, %s", envAPIToken, code, errOut)
	}
	t.Setenv(envToken, " "+remoteToken+"\n")
	t.Setenv(envAPIToken, "other")
	if code, _, errOut := cli("run", file, "--server", r.URL(), "--progress", "never"); code != exitOK {
		t.Fatalf("token from $%s first: exit %d, %s", envToken, code, errOut)
	}
}

func TestRemoteToken(t *testing.T) {
	// No token from the environment the tests run in.
	t.Setenv(envToken, "")
	t.Setenv(envAPIToken, "")
	r := startRemote(t)
	file := writeFile(t, "remote.yaml", remotePlaybook)
	code, _, errOut := cli("run", file, "--server", r.URL())
	if code != exitInvalid || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "CURSORFLOW_TOKEN") {
		t.Fatalf("no token: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = cli("run", file, "--server", r.URL(), "--token", "wrong")
	if code != exitInvalid || !strings.Contains(errOut, "invalid bearer token") {
		t.Fatalf("wrong token: exit %d, stderr %q", code, errOut)
	}
	t.Setenv(envToken, remoteToken)
	code, out, errOut := cli("run", file, "--server", r.URL())
	if code != exitOK {
		t.Fatalf("token from $%s: exit %d, %s", envToken, code, errOut)
	}
	id := executionID(t, out)
	t.Setenv(envServer, r.URL())
	if code, out, errOut := cli("status", id); code != exitOK || !strings.Contains(out, "completed") {
		t.Fatalf("status with $%s: exit %d %q %q", envServer, code, out, errOut)
	}
}

func TestRemoteStatusEventsCancel(t *testing.T) {
	t.Parallel()
	r := startRemote(t)
	srv := []string{"--server", r.URL(), "--token", remoteToken}
	file := writeFile(t, "remote.yaml", remotePlaybook)
	code, out, errOut := cli(append([]string{"run", file}, srv...)...)
	if code != exitOK {
		t.Fatalf("run: %d %s", code, errOut)
	}
	id := executionID(t, out)

	code, out, _ = cli(append([]string{"status", id}, srv...)...)
	if code != exitOK || !strings.Contains(out, "execution "+id+" (remote): completed") || !strings.Contains(out, "step start") {
		t.Fatalf("status: %d %q", code, out)
	}
	code, out, _ = cli(append([]string{"status", id, "--json"}, srv...)...)
	var st engine.Status
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.Status != engine.StatusCompleted {
		t.Fatalf("status --json: %d %q", code, out)
	}
	if code, _, errOut := cli(append([]string{"status", "nope"}, srv...)...); code != exitInvalid || !strings.Contains(errOut, "404") {
		t.Fatalf("status of unknown: %d %q", code, errOut)
	}

	evs, _ := r.Log.Read(context.Background(), id, 0, 0)
	code, out, _ = cli(append([]string{"events", id}, srv...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != len(evs) || !strings.Contains(lines[len(lines)-1], "execution.completed") {
		t.Fatalf("events: %d, %d lines for %d events: %q", code, len(lines), len(evs), out)
	}
	code, out, _ = cli(append([]string{"events", id, "--json", "--after", "1"}, srv...)...)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	var first eventlog.Event
	if code != exitOK || len(lines) != len(evs)-1 || json.Unmarshal([]byte(lines[0]), &first) != nil || first.Seq != 2 {
		t.Fatalf("events --json --after 1: %d %q", code, out)
	}

	// A running execution: follow it in the background, cancel it, and
	// the follow ends with the cancellation.
	gated := writeFile(t, "gated.yaml", gatedRemotePlaybook)
	type result struct {
		code        int
		out, errOut string
	}
	runDone := make(chan result, 1)
	go func() {
		c, o, e := cli(append([]string{"run", gated}, srv...)...)
		runDone <- result{c, o, e}
	}()
	var gid string
	deadline := time.Now().Add(10 * time.Second)
	for gid == "" {
		ids, _ := r.Log.Executions(context.Background(), eventlog.ExecutionsQuery{Unfinished: true})
		for _, x := range ids {
			if s, err := engine.Inspect(context.Background(), r.Log, x); err == nil && len(s.InFlight) > 0 {
				gid = x
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("gated execution never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	followDone := make(chan result, 1)
	go func() {
		c, o, e := cli(append([]string{"events", gid, "--follow"}, srv...)...)
		followDone <- result{c, o, e}
	}()
	code, out, errOut = cli(append([]string{"cancel", gid}, srv...)...)
	if code != exitOK || !strings.Contains(out, "cancel requested for "+gid) {
		t.Fatalf("cancel: %d %q %q", code, out, errOut)
	}
	for name, ch := range map[string]chan result{"run": runDone, "events --follow": followDone} {
		select {
		case res := <-ch:
			switch name {
			case "run":
				if res.code != exitInvalid || !strings.Contains(res.out, "cancelled in ") {
					t.Errorf("run of a cancelled execution: %d %q %q", res.code, res.out, res.errOut)
				}
			default:
				if res.code != exitOK || !strings.Contains(res.out, "execution.cancelled") {
					t.Errorf("events --follow: %d %q %q", res.code, res.out, res.errOut)
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not end after the cancellation", name)
		}
	}
	if code, _, errOut := cli(append([]string{"cancel", gid}, srv...)...); code != exitInvalid || !strings.Contains(errOut, "409") {
		t.Fatalf("second cancel: %d %q", code, errOut)
	}
}

func TestRemoteUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"status"},
		{"status", "a", "b", "--server", "http://x"},
		{"events", "--server", "http://x"},
		{"cancel", "id", "--server", "ftp://x"},
		{"run", "--server", "http://x"},
		{"run", "f.yaml", "--server", "http://x", "--credential", "a=b"},
		{"status", "--bogus", "id", "--server", "http://x"},
	} {
		if code, _, _ := cli(args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
	t.Run("no server", func(t *testing.T) {
		if code, _, errOut := cli("status", "id", "--server", ""); code != exitUsage || !strings.Contains(errOut, "--server") {
			t.Errorf("exit %d %q", code, errOut)
		}
	})
}

// TestRemoteRunFromADeepPath: a playbook whose path is longer than the
// server takes as a file name (api.MaxPlaybookFile) still runs on the
// server, named by its base name in the server's messages.
func TestRemoteRunFromADeepPath(t *testing.T) {
	t.Parallel()
	r := startRemote(t)
	dir := t.TempDir()
	for len(dir) <= api.MaxPlaybookFile {
		dir = filepath.Join(dir, strings.Repeat("d", 200))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "remote.yaml")
	if err := os.WriteFile(file, []byte(remotePlaybook), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli("run", file, "--server", r.URL(), "--token", remoteToken); code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(invalidPlaybook), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := cli("run", bad, "--server", r.URL(), "--token", remoteToken)
	if code != exitUsage || !strings.Contains(errOut, "bad.yaml:5:5: step start: tool is required") {
		t.Fatalf("invalid playbook: exit %d, stderr %q", code, errOut)
	}
}
