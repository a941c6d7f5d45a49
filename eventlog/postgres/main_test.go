package postgres_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/internal/leakcheck"
)

// Every Log stops its goroutines (listeners, pools) on Close.
func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m, nil) }
