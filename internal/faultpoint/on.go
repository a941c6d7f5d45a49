//go:build faultpoint

package faultpoint

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

// Enabled reports whether this binary was built with the faultpoint tag.
const Enabled = true

var (
	point = os.Getenv(EnvPoint)
	after = func() int64 {
		n, err := strconv.ParseInt(os.Getenv(EnvAfter), 10, 64)
		if err != nil || n < 1 {
			return 1
		}
		return n
	}()
	hits atomic.Int64
)

// Hit SIGKILLs the process the after-th time the point named by
// CURSORFLOW_FAULTPOINT is reached, or SIGSTOPs it with
// CURSORFLOW_FAULTPOINT_ACTION=stop (it then goes on where it was once
// sent SIGCONT).
func Hit(name string) {
	if name != point || hits.Add(1) != after {
		return
	}
	if mark := os.Getenv(EnvMark); mark != "" {
		if f, err := os.OpenFile(mark, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
			_, _ = fmt.Fprintf(f, "%s %d\n", name, os.Getpid())
			_ = f.Sync()
			_ = f.Close()
		}
	}
	if os.Getenv(EnvAction) == ActionStop {
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
