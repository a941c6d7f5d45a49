package main

import (
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestRunSaysWhatValidateWarns: run prints validate's warnings on stderr
// before it starts, a mistyped key among them, and runs on. A key with no
// effect (a tool's parms: for params:, a cursor's marc: for mark:) was
// said only by validate: a run went ahead in silence without it.
func TestRunSaysWhatValidateWarns(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	file := writeFile(t, "typo.yaml", `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: typo}
workflow:
  - step: start
    tool: {kind: postgres, auth: pg, command: "SELECT 1 AS x", parms: [1]}
`)
	want := file + `:6:64: warning: step start: tool kind postgres has no configuration key "parms" (ignored)`
	code, out, errOut := cli("run", file, "--eventlog", "memory:", "--progress", "never", "--credential", "pg="+dsn)
	if code != exitOK || !strings.Contains(errOut, want+"\n") {
		t.Fatalf("run: exit %d, stdout %q, stderr %q; want exit 0 and stderr holding %q", code, out, errOut, want)
	}
	if _, vout, _ := cli("validate", file); !strings.Contains(vout, want+"\n") {
		t.Fatalf("validate said %q, not %q", vout, want)
	}
}
