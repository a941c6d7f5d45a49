package shell_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/internal/leakcheck"
)

// The package starts goroutines: every test must leave none behind.
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m, nil) }
