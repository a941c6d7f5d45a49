package shell_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/shell"

	"github.com/cursorflow/cursorflow/tools/internal/proc/proctest"
)

// escaper is a command that starts a process in a session of its own
// (setsid, as a daemonising script does), which writes its pid to
// $PIDFILE and sleeps; the command waits for the pid, then runs tail.
const escaper = `setsid sh -c 'echo $$ > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; exec sleep 30' %s &
while [ ! -e "$PIDFILE" ]; do sleep 0.01; done
`

// escapedPid returns the pid the escaper wrote, and kills it when the
// test ends (when the tool did not).
func escapedPid(t *testing.T, pidfile string) int {
	t.Helper()
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatalf("the escaped process wrote no pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// TestEscapedProcessDiesWithTimeout: a command that timed out takes with
// it the processes it started in a session (and so a process group) of
// their own. Before, only the command's process group was killed: a
// `setsid` daemon, or a Python subprocess started with
// start_new_session=True, ran on, orphaned, after its step had failed
// (and after the CLI was interrupted, which cancels the same way).
func TestEscapedProcessDiesWithTimeout(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pid")
	out, err := shell.New(shell.Config{}).Execute(context.Background(), &tools.Call{Config: map[string]any{
		"command": strings.Replace(escaper, "%s", ">/dev/null 2>&1 </dev/null", 1) + "sleep 30",
		"env":     map[string]any{"PIDFILE": pidfile},
		"timeout": 1,
	}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if out.Status != tools.StatusError || out.Data.(map[string]any)["timeout"] != true {
		t.Fatalf("status %q data %v, want a timeout", out.Status, out.Data)
	}
	proctest.WaitGone(t, escapedPid(t, pidfile), "the process the command started in a session of its own")
}

// TestEscapedProcessHoldingOutputIsKilled: a command that exits while a
// process it started in a session of its own holds its output fails
// once the pipes are given up, as TestStragglerHoldingOutputIsKilled's,
// and that process dies too. Before, the error said "(killed)" and the
// process ran on.
func TestEscapedProcessHoldingOutputIsKilled(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pid")
	out, err := shell.New(shell.Config{}).Execute(context.Background(), &tools.Call{Config: map[string]any{
		"command": strings.Replace(escaper, "%s", "", 1) + "echo started",
		"env":     map[string]any{"PIDFILE": pidfile},
	}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if out.Status != tools.StatusError || !strings.Contains(out.Error, "still held its output") {
		t.Fatalf("status %q error %q, want a failure saying what held the output", out.Status, out.Error)
	}
	proctest.WaitGone(t, escapedPid(t, pidfile), "the process the command started in a session of its own")
}
