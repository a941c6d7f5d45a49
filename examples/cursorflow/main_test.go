package main

import (
	"os"
	"testing"

	"github.com/cursorflow/cursorflow/internal/leakcheck"
)

// The package starts goroutines: every test must leave none behind. The
// CLI built for the process tests is removed at the end.
func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m, func(code int) {
		removeCLIBuild()
		os.Exit(code)
	})
}
