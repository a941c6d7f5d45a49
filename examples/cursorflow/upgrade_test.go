package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/eventlogurl"
)

// TestResumeAcrossReleases: an operator upgrades, or rolls back, while
// executions are unfinished in a SQLite log. An execution an earlier
// release started with a playbook this build refuses (max_in_flight over
// the bound added since), and one a newer release started under
// semantics this build does not know, are each refused by resume saying
// why and what to do (the diagnostic alone read as a mistake in a file;
// the newer one was driven on under this build's older rules), and
// status says the same for the first.
func TestResumeAcrossReleases(t *testing.T) {
	t.Parallel()
	logURL := "sqlite:" + filepath.Join(t.TempDir(), "events.db")
	log, err := eventlogurl.Open(context.Background(), logURL)
	if err != nil {
		t.Fatal(err)
	}
	book := "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\nworkflow:\n" +
		"  - step: start\n    loop:\n      in: \"{{ range(3) | list }}\"\n      iterator: n\n" +
		"      spec: {mode: parallel, max_in_flight: 20000}\n    tool: {kind: noop}\n"
	for id, semantics := range map[string]int{"from-older": 1, "from-newer": 999} {
		pb := book
		if semantics > 1 {
			pb = strings.Replace(book, "max_in_flight: 20000", "max_in_flight: 2", 1)
		}
		started, _ := json.Marshal(map[string]any{"playbook": pb, "file": "wide.yaml", "semantics": semantics})
		if _, err := log.Append(context.Background(), []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeExecutionStarted, Payload: started}}); err != nil {
			t.Fatal(err)
		}
	}
	_ = log.Close()

	code, _, errOut := cli("resume", "from-older", "--eventlog", logURL)
	if code != exitUsage || !strings.Contains(errOut, "refuses the playbook it was started with") ||
		!strings.Contains(errOut, "finish it with that release") || !strings.Contains(errOut, "max_in_flight: 20000 is more than 10000") {
		t.Errorf("resume of an older release's execution: exit %d: %s", code, errOut)
	}
	code, _, errOut = cli("status", "from-older", "--eventlog", logURL)
	if code != exitInvalid || !strings.Contains(errOut, "finish it with that release") {
		t.Errorf("status of an older release's execution: exit %d: %s", code, errOut)
	}
	code, _, errOut = cli("resume", "from-newer", "--eventlog", logURL)
	if code != exitInvalid || !strings.Contains(errOut, "started by a newer cursorflow") || !strings.Contains(errOut, "semantics 999") {
		t.Errorf("resume of a newer release's execution: exit %d: %s", code, errOut)
	}
}
