//go:build unix

package proc

import (
	"os/exec"
	"syscall"
)

// killGroup runs cmd in its own process group and makes cancellation kill
// the whole group, so `sh -c "a | b"`, or code that started subprocesses,
// leaves no orphan holding the pipes. Where the system can, the child is
// also killed when the worker dies (kill -9 included): a resumed
// execution runs its rows again, and must not race a body still running.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
