package leader_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/engine/leader"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
)

// A host service runs the orchestrator inside its own process: it leads
// while it holds the lease (resuming every unfinished execution when it
// takes over) and serves the API and dashboard under /cursorflow/ on its
// own ServeMux, next to its own routes. Run the same code on several
// machines: one leads, the others stand by, serve reads and take over.
func ExampleOrchestrator() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pcfg, err := pglog.ParsePoolConfig(os.Getenv("DATABASE_URL"))
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
	log, err := pglog.New(ctx, pool, pglog.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer log.Close()
	lease, err := leader.New(ctx, leader.Config{Pool: pool})
	if err != nil {
		fmt.Println(err)
		return
	}
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	orch, err := leader.NewOrchestrator(leader.OrchestratorConfig{
		Lease:  lease,
		Log:    log,
		Engine: engine.Config{CommandLease: time.Minute},
		// Workers elsewhere (examples/worker) run the commands.
		NewDispatcher: func(ctx context.Context) (leader.Dispatcher, error) {
			return natsjs.NewDispatcher(ctx, natsjs.Config{Conn: nc})
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) { /* the host's own API */ })
	mux.Handle("/cursorflow/", http.StripPrefix("/cursorflow", api.New(api.Config{
		Engine: orch, Log: log, Token: os.Getenv("CURSORFLOW_API_TOKEN"), Ready: orch.Ready,
	})))
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println(err)
		}
	}()
	defer srv.Close()

	// Lead until interrupted; then release the lease so a standby takes
	// over at once.
	if err := orch.Run(ctx); err != nil {
		fmt.Println(err)
	}
}
