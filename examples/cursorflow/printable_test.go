package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/apitest"
)

// hostile holds what an HTTP endpoint, a database row or a playbook
// author may put in a step name or an error: a terminal escape sequence
// that retitles the window and clears the screen.
const hostile = "\x1b]0;owned\a\x1b[2J"

// TestControlCharactersNotPrinted: what a playbook's steps and the
// endpoints its tools reach say is printed with its control characters
// escaped, so an API's error body or a stranger's step name cannot drive
// the terminal of the operator who runs, or reads the status or events
// of, the execution.
func TestControlCharactersNotPrinted(t *testing.T) {
	t.Parallel()
	noControls := func(what, out string) {
		t.Helper()
		if strings.ContainsAny(out, "\x1b\a") {
			t.Errorf("%s prints control characters: %q", what, out)
		}
		if !strings.Contains(out, `\x1b]0;owned\x07\x1b[2J`) {
			t.Errorf("%s does not show the escaped text: %q", what, out)
		}
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(hostile))
	}))
	t.Cleanup(api.Close)
	local := writeFile(t, "esc.yaml", `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: esc}
workflow:
  - step: start
    tool: {kind: http, url: "`+api.URL+`"}
`)
	code, out, errOut := cli("run", local, "--eventlog", "memory:", "--progress", "never")
	if code != exitInvalid {
		t.Fatalf("local run: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	noControls("a local run's failure", out)

	r := startRemote(t)
	remote := writeFile(t, "remote.yaml", `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: esc}
workflow:
  - step: start
    tool: {kind: echo, msg: hi}
    next: ["x\e]0;owned\a\e[2J"]
  - step: "x\e]0;owned\a\e[2J"
    tool: {kind: echo, msg: '`+apitest.FailMsg+`'}
`)
	code, out, errOut = cli("run", remote, "--server", r.URL(), "--token", remoteToken, "--progress", "never")
	if code != exitInvalid {
		t.Fatalf("run --server: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	noControls("run --server", out)
	id := executionID(t, out)
	_, out, _ = cli("status", id, "--server", r.URL(), "--token", remoteToken)
	noControls("status", out)
	_, out, _ = cli("events", id, "--server", r.URL(), "--token", remoteToken)
	noControls("events", out)
	var drawn strings.Builder
	(&progress{w: &drawn, now: time.Now}).draw(&engine.Status{Playbook: "esc", Status: engine.StatusRunning,
		Steps: map[string]string{"x" + hostile: engine.StatusRunning}})
	noControls("progress", drawn.String())
}
