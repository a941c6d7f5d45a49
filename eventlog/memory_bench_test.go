package eventlog_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
)

func BenchmarkMemoryAppend(b *testing.B) {
	logtest.Bench(b, func(b *testing.B) eventlog.Log {
		l := eventlog.NewMemory()
		b.Cleanup(func() { _ = l.Close() })
		return l
	})
}
