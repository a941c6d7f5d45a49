package postgres_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/pgcpu"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// BenchmarkAppend measures logs made by Open, the configuration a
// standalone deployment gets. Where the server runs on this machine, each
// benchmark also reports its CPU time per op (server-µs/op): on a small
// machine an append's server side is most of what it costs a drain.
func BenchmarkAppend(b *testing.B) {
	dsn := testenv.Postgres(b)
	pool := testPool(b)
	server, err := pgcpu.Of(b.Context(), pool)
	if err != nil {
		b.Fatal(err)
	}
	logtest.BenchServer(b, func(b *testing.B) eventlog.Log {
		l, err := postgres.Open(b.Context(), dsn, postgres.Config{Schema: randomSchema(b, pool)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		return l
	}, server.CPU)
}
