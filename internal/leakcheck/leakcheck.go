// Package leakcheck fails a test binary that leaves goroutines running,
// as goleak.VerifyTestMain does, but gives goroutines that are ending a
// while to end.
//
// goleak.VerifyTestMain looks again for about 0.4 s before it reports a
// goroutine. On a loaded machine a goroutine that a test's cleanup has
// already told to stop (a pool's connection closer, a consumer draining
// its last message) can take longer than that to be scheduled and return,
// and the whole package would fail for a goroutine that was not leaked.
// A leaked goroutine is still there after Settle; one that was ending is
// not.
package leakcheck

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Settle is how long VerifyTestMain waits, after the tests passed, for
// the goroutines they started to end.
const Settle = 15 * time.Second

// VerifyTestMain runs m's tests and, when they passed, fails the binary
// if goroutines that goleak does not ignore are still running Settle
// later, printing their stacks. cleanup, if set, runs last with the exit
// code instead of os.Exit (goleak.Cleanup's contract): it must exit.
func VerifyTestMain(m *testing.M, cleanup func(code int)) {
	code := m.Run()
	if code == 0 {
		if err := find(Settle); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	if cleanup == nil {
		cleanup = os.Exit
	}
	cleanup(code)
}

// find looks for leaked goroutines until none is left or within has
// passed, and returns goleak's report of the last look.
func find(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := goleak.Find() // itself looks again for about 0.4 s
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
