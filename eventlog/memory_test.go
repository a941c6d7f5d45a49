package eventlog_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	logtest.Run(t, func(t *testing.T) eventlog.Log {
		l := eventlog.NewMemory()
		t.Cleanup(func() { _ = l.Close() })
		return l
	})
}
