package proc

import "syscall"

// dieWithParent has the kernel SIGKILL the child when the thread that
// started it exits, which for a Go worker means when the process dies:
// the runtime ends threads only for goroutines that locked one and
// returned, and nothing here does.
func dieWithParent(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
