package sqlite_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every Log stops its goroutines (listeners, pools) on Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
