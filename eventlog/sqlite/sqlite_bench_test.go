package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
)

func BenchmarkAppend(b *testing.B) {
	logtest.Bench(b, func(b *testing.B) eventlog.Log {
		return open(b, filepath.Join(b.TempDir(), "events.db"), sqlite.Config{})
	})
}
