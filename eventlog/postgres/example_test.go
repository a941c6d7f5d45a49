package postgres_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
)

// A host that already has a pool hands it to New; the log lives in its
// own schema. The pool is built from ParsePoolConfig, as Open's is.
func ExampleNew() {
	ctx := context.Background()
	pcfg, err := postgres.ParsePoolConfig("postgres://app@db.internal:5432/app")
	if err != nil {
		fmt.Println(err)
		return
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	log, err := postgres.New(ctx, pool, postgres.Config{Schema: "cursorflow"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer log.Close() // leaves the pool open

	res, err := log.Append(ctx, []eventlog.Event{
		{ExecutionID: "exec-1", Type: eventlog.TypeExecutionStarted},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res[0].Seq)
}
