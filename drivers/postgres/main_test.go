package postgres_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The package starts goroutines: every test must leave none behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
