package postgres_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// BenchmarkAppend measures logs made by Open, the configuration a
// standalone deployment gets.
func BenchmarkAppend(b *testing.B) {
	dsn := testenv.Postgres(b)
	pool := testPool(b)
	logtest.Bench(b, func(b *testing.B) eventlog.Log {
		l, err := postgres.Open(b.Context(), dsn, postgres.Config{Schema: randomSchema(b, pool)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		return l
	})
}
