//go:build unix && !linux

package proc

import "syscall"

// dieWithParent does nothing where the system has no parent-death signal:
// a child outlives a worker killed with SIGKILL.
func dieWithParent(*syscall.SysProcAttr) {}
