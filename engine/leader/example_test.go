package leader_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/engine/leader"
	"github.com/cursorflow/cursorflow/eventlog"
)

// A replica campaigns for the orchestrator lease and drives executions
// only while it holds it, appending through the fenced log.
func ExampleLease_Run() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:5432/test")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	lease, err := leader.New(ctx, leader.Config{Pool: pool, TTL: 15 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	var log eventlog.Log = eventlog.NewMemory() // the shared postgres log in production
	_ = lease.Run(ctx, func(lctx context.Context) {
		fenced := lease.Fence(log)
		_ = fenced // build the engine on it, resume, serve until lctx is done
		<-lctx.Done()
	})
}
