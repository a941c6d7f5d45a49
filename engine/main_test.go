package engine_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The engine starts goroutines (orchestrator, workers, heartbeats): every
// test must leave none behind once its engine is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
