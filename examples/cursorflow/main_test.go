package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The package starts goroutines: every test must leave none behind. The
// CLI built for the process tests is removed at the end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeCLIBuild()
		os.Exit(code)
	}))
}
