// Command server is cursorflow's distributed orchestrator: the HTTP API
// over a PostgreSQL event log, with commands carried to worker processes
// (examples/worker) over NATS JetStream.
//
// Run two or more replicas against the same database and NATS: one holds
// the leader lease (engine/leader) and drives every execution; the
// others are standbys that take over from the event log within the lease
// time when the leader dies. Reads (GET) work on every replica; writes
// (start, cancel) answer 503 on a standby, and /readyz answers 503 there
// too, so a load balancer routes to the leader.
//
//	server --eventlog postgres://... --nats nats://127.0.0.1:4222 --listen :8080
//
// Observability is configured by flags: --otlp-endpoint sends traces and
// metrics to an OTLP/HTTP collector, --prometheus serves /metrics. Both
// derive from the events the leader appends (engine/otelobserve), and
// trace context travels with commands through NATS.
//
// SIGTERM or SIGINT stops the server: it releases the lease at once so a
// standby takes over without waiting for it to expire.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/engine/otelobserve"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/engine/leader"
)

// options are the server's flags.
type options struct {
	listen       string
	eventlog     string
	schema       string
	natsURL      string
	prefix       string
	token        string
	id           string
	lease        time.Duration
	commandLease time.Duration
	ackWait      time.Duration
	eventAckWait time.Duration
	verbose      bool
	otlp         string
	prometheus   bool
	// observer derives traces and metrics from the leader's events.
	observer *otelobserve.Observer
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.listen, "listen", ":8080", "HTTP listen address")
	fs.StringVar(&o.eventlog, "eventlog", os.Getenv("CURSORFLOW_EVENTLOG"), "PostgreSQL event log DSN (postgres://...); env CURSORFLOW_EVENTLOG")
	fs.StringVar(&o.schema, "schema", pglog.DefaultSchema, "schema of the event log, the leader lease and the playbook store")
	fs.StringVar(&o.natsURL, "nats", envOr("CURSORFLOW_NATS", nats.DefaultURL), "NATS URL; env CURSORFLOW_NATS")
	fs.StringVar(&o.prefix, "prefix", natsjs.DefaultPrefix, "prefix of the NATS subjects, streams and bucket")
	fs.StringVar(&o.token, "token", "", "API bearer token (default: env CURSORFLOW_API_TOKEN; empty disables authentication)")
	fs.StringVar(&o.id, "id", "", "this replica's id in the leader lease (default hostname-pid-random)")
	fs.DurationVar(&o.lease, "lease", leader.DefaultTTL, "leader lease TTL: a dead leader is replaced within about this long")
	fs.DurationVar(&o.commandLease, "command-lease", engine.DefaultCommandLease, "engine lease of step and item commands (and of in-flight commands after a takeover)")
	fs.DurationVar(&o.ackWait, "ack-wait", natsjs.DefaultAckWait, "JetStream AckWait of command messages")
	fs.DurationVar(&o.eventAckWait, "event-ack-wait", natsjs.DefaultEventAckWait, "JetStream AckWait of report messages")
	fs.BoolVar(&o.verbose, "v", false, "log at debug level")
	fs.StringVar(&o.otlp, "otlp-endpoint", os.Getenv("CURSORFLOW_OTLP_ENDPOINT"), "OTLP/HTTP collector base URL for traces and metrics (e.g. http://collector:4318); env CURSORFLOW_OTLP_ENDPOINT")
	fs.BoolVar(&o.prometheus, "prometheus", false, "serve metrics in the Prometheus format at /metrics (behind the token)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.token == "" {
		o.token = os.Getenv("CURSORFLOW_API_TOKEN")
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if o.eventlog == "" || !strings.HasPrefix(o.eventlog, "postgres") {
		fmt.Fprintln(os.Stderr, "server: --eventlog postgres://... is required (replicas share the log)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, o, logger); err != nil {
		logger.Error("server failed", "error", err)
		return 1
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// serve runs the replica until ctx is done.
func serve(ctx context.Context, o options, logger *slog.Logger) error {
	pcfg, err := pgxpool.ParseConfig(o.eventlog)
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	if _, ok := pcfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok {
		// As eventlog/postgres.Open does: the append statement's generic
		// plan is as good as a custom one and skips planning on every batch.
		pcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	defer pool.Close()
	log, err := pglog.New(ctx, pool, pglog.Config{Schema: o.schema, Logger: logger})
	if err != nil {
		return err
	}
	defer log.Close()
	lease, err := leader.New(ctx, leader.Config{Pool: pool, Schema: o.schema, Owner: o.id, TTL: o.lease, Logger: logger})
	if err != nil {
		return err
	}
	nc, err := nats.Connect(o.natsURL, nats.Name("cursorflow-server "+lease.Owner()), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer nc.Close()
	store, err := playbookStore(ctx, pool, o.schema)
	if err != nil {
		return err
	}
	transport := natsjs.Config{Conn: nc, Prefix: o.prefix, AckWait: o.ackWait, EventAckWait: o.eventAckWait, Logger: logger}
	r := &runner{}
	// Traces and metrics derive from the events the leader appends; the
	// providers are configured here and exported as the flags say.
	observer, metrics, shutdownOTel, err := otelobserve.Setup(ctx, otelobserve.Config{
		OTLPEndpoint: o.otlp, Prometheus: o.prometheus, ServiceName: "cursorflow-server", Logger: logger})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownOTel(sctx) // flush what is buffered; the process is ending either way
	}()
	o.observer = observer
	acfg := api.Config{
		Engine: r, Log: log, Playbooks: store, Token: o.token, Logger: logger, Metrics: metrics,
		Ready: func(context.Context) error {
			if !r.leading() {
				return errors.New("standby: another replica holds the leader lease")
			}
			return nil
		},
	}
	if err := acfg.Validate(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.New(acfg), ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	logger.Info("server listening", "addr", ln.Addr().String(), "replica", lease.Owner())

	err = lease.Run(ctx, func(lctx context.Context) {
		if err := lead(lctx, o, logger, log, lease, transport, r); err != nil && lctx.Err() == nil {
			logger.Error("leading failed; stepping down", "error", err)
		}
	})
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if herr := <-httpDone; herr != nil && !errors.Is(herr, http.ErrServerClosed) {
		return herr
	}
	return err
}

// playbookStore opens the API's playbook store. Two replicas starting at
// once can race on its CREATE TABLE IF NOT EXISTS (not atomic in
// PostgreSQL); the loser retries and finds the table.
func playbookStore(ctx context.Context, pool *pgxpool.Pool, schema string) (*api.PostgresStore, error) {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var store *api.PostgresStore
		if store, err = api.NewPostgresStore(ctx, pool, schema); err == nil {
			return store, nil
		}
		select {
		case <-time.After(time.Duration(50*(attempt+1)) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, err
}
