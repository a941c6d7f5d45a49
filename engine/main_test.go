package engine_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/internal/leakcheck"
)

// The engine starts goroutines (orchestrator, workers, heartbeats): every
// test must leave none behind once its engine is closed.
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m, nil) }
