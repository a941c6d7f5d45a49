package python_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/python"

	"github.com/cursorflow/cursorflow/tools/internal/proc/proctest"
)

// TestEscapedSubprocessDiesWithCancel: cancelling a call (the execution
// cancelled, the CLI interrupted) kills the subprocesses its code started
// in a session of their own (start_new_session=True). Before, only the
// interpreter's process group was killed, and the subprocess ran on,
// orphaned.
func TestEscapedSubprocessDiesWithCancel(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan tools.Output, 1)
	go func() {
		out, err := python.New(python.Config{Python: interpreter(t)}).Execute(ctx, &tools.Call{Config: map[string]any{
			"code": `import os, subprocess, time
p = subprocess.Popen(["sleep", "30"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
with open(pidfile + ".tmp", "w") as f:
    f.write(str(p.pid))
os.rename(pidfile + ".tmp", pidfile)
time.sleep(30)
`,
			"input": map[string]any{"pidfile": pidfile},
		}})
		if err != nil {
			t.Errorf("Execute: %v", err)
		}
		done <- out
	}()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); ; {
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the code started no subprocess within 10s")
		}
		time.Sleep(10 * time.Millisecond) // polling for the file with a deadline
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	cancel()
	if out := <-done; out.Status != tools.StatusError {
		t.Fatalf("status %q, want error", out.Status)
	}
	proctest.WaitGone(t, pid, "the subprocess of the cancelled call")
}

// TestResultPipeHolderIsKilled: code that leaves a process running with
// the result pipe open (os.system("... &") hands the interpreter's file
// descriptor 3 on) fails once the interpreter has exited and the pipe is
// still held WaitDelay later, saying so, and that process dies with the
// call. Before, the tool waited for the pipe's end with no bound: the
// step outlived its timeout, a cancel, and the CLI's interrupt (which
// abandoned it), for as long as that process ran.
func TestResultPipeHolderIsKilled(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pid")
	done := make(chan tools.Output, 1)
	go func() {
		out, err := python.New(python.Config{Python: interpreter(t)}).Execute(context.Background(), &tools.Call{Config: map[string]any{
			"code":    `import os; os.system("sleep 30 >/dev/null 2>&1 </dev/null & echo $! > " + pidfile); result = 1`,
			"input":   map[string]any{"pidfile": pidfile},
			"timeout": 5,
		}})
		if err != nil {
			t.Errorf("Execute: %v", err)
		}
		done <- out
	}()
	var out tools.Output
	select {
	case out = <-done:
	case <-time.After(20 * time.Second):
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL) // lets Execute return
			}
		}
		<-done
		t.Fatal("Execute did not return within 20s, past its 5s timeout")
	}
	if out.Status != tools.StatusError || !strings.Contains(out.Error, "result pipe") {
		t.Fatalf("status %q error %q, want a failure saying what held the result pipe", out.Status, out.Error)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	proctest.WaitGone(t, pid, "the process holding the result pipe after its call ended")
}
