// Command server is cursorflow's distributed orchestrator: the HTTP API
// and dashboard over a PostgreSQL event log, with commands carried to
// worker processes (examples/worker) over NATS JetStream.
//
// Run two or more replicas against the same database and NATS: one holds
// the leader lease (engine/leader) and drives every execution; the
// others are standbys that take over from the event log within the lease
// time when the leader dies. Reads (GET) work on every replica; writes
// (start, cancel) answer 503 on a standby, and /readyz answers 503 there
// too, so a load balancer routes to the leader.
//
//	server --eventlog postgres://... --nats nats://127.0.0.1:4222 --token-file /run/secrets/api
//
// Safe by default: the server listens on 127.0.0.1:8080 (--listen to bind
// elsewhere) and refuses to start without a bearer token (--token,
// --token-file or CURSORFLOW_API_TOKEN, else CURSORFLOW_TOKEN, the name
// the cursorflow CLI reads) unless --insecure says that an open API is
// what you want. The token is trimmed of surrounding white space, like the
// tokens clients present.
//
// Results larger than --result-threshold (64 KiB) go to --result-store
// (s3://..., or file:// on a directory every machine shares), which the
// workers must also be given; events and NATS commands then carry a
// reference. Without it results stay in the event log (and a command
// carrying one over NATS's max_payload cannot be sent).
//
// Observability is configured by flags: --otlp-endpoint sends traces and
// metrics to an OTLP/HTTP collector, --prometheus serves /metrics. Both
// derive from the events the leader appends (engine/otelobserve), and
// trace context travels with commands through NATS.
//
// SIGTERM or SIGINT stops the server: it releases the lease at once so a
// standby takes over without waiting for it to expire.
//
// Everything here is flag parsing and wiring of public packages; a host
// service that embeds the orchestrator does the same in its own main (see
// the examples of engine/leader and engine/api).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/engine/leader"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/engine/otelobserve"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/examples/internal/natslog"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"
)

// DefaultListen is the address the server binds without --listen: the
// loopback interface only.
const DefaultListen = "127.0.0.1:8080"

// options are the server's flags.
type options struct {
	listen, eventlog, schema, natsURL, prefix, token, tokenFile, id string
	insecure, verbose, prometheus                                   bool
	allowedHosts                                                    []string
	otlp                                                            string
	lease, commandLease, ackWait, eventAckWait                      time.Duration
	resultStore                                                     string
	resultThreshold                                                 int64
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.listen, "listen", DefaultListen, "HTTP listen address; the default binds the loopback interface only")
	fs.StringVar(&o.eventlog, "eventlog", os.Getenv("CURSORFLOW_EVENTLOG"), "PostgreSQL event log DSN (postgres://...); env CURSORFLOW_EVENTLOG")
	fs.StringVar(&o.schema, "schema", pglog.DefaultSchema, "schema of the event log, the leader lease and the playbook store")
	fs.StringVar(&o.natsURL, "nats", envOr("CURSORFLOW_NATS", nats.DefaultURL), "NATS URL; env CURSORFLOW_NATS")
	fs.StringVar(&o.prefix, "prefix", natsjs.DefaultPrefix, "prefix of the NATS subjects, streams and bucket")
	fs.StringVar(&o.token, "token", "", "API bearer token, trimmed of surrounding white space (default: env "+envAPIToken+", else "+envCLIToken+", the name the cursorflow CLI reads)")
	fs.StringVar(&o.tokenFile, "token-file", "", "read the API bearer token from this file (trimmed of surrounding white space)")
	fs.BoolVar(&o.insecure, "insecure", false, "serve the API and dashboard without a token (anyone who can connect may run playbooks)")
	fs.Func("allowed-host", "with --insecure, a host name (besides IP addresses and localhost) the server answers under; repeatable", func(v string) error {
		o.allowedHosts = append(o.allowedHosts, v)
		return nil
	})
	fs.StringVar(&o.id, "id", "", "this replica's id in the leader lease (default hostname-pid-random)")
	fs.DurationVar(&o.lease, "lease", leader.DefaultTTL, "leader lease TTL: a dead leader is replaced within about this long")
	fs.DurationVar(&o.commandLease, "command-lease", engine.DefaultCommandLease, "engine lease of step and item commands (and of in-flight commands after a takeover)")
	fs.DurationVar(&o.ackWait, "ack-wait", natsjs.DefaultAckWait, "JetStream AckWait of command messages")
	fs.DurationVar(&o.eventAckWait, "event-ack-wait", natsjs.DefaultEventAckWait, "JetStream AckWait of report messages")
	fs.BoolVar(&o.verbose, "v", false, "log at debug level")
	fs.StringVar(&o.otlp, "otlp-endpoint", os.Getenv("CURSORFLOW_OTLP_ENDPOINT"), "OTLP/HTTP collector base URL for traces and metrics (e.g. http://collector:4318); env CURSORFLOW_OTLP_ENDPOINT")
	fs.BoolVar(&o.prometheus, "prometheus", false, "serve metrics in the Prometheus format at /metrics (behind the token)")
	fs.StringVar(&o.resultStore, "result-store", os.Getenv("CURSORFLOW_RESULT_STORE"), "result store for results over --result-threshold (s3://BUCKET?region=...&endpoint=..., file:///shared/dir); the workers must use the same one; empty keeps results in the event log; env CURSORFLOW_RESULT_STORE")
	fs.Int64Var(&o.resultThreshold, "result-threshold", resultstore.DefaultThreshold, "results larger than this many bytes (JSON) go to the result store")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := o.resolveToken(); err != nil {
		fmt.Fprintln(stderr, "server:", err)
		return 2
	}
	if o.eventlog == "" || !strings.HasPrefix(o.eventlog, "postgres") {
		fmt.Fprintln(stderr, "server: --eventlog postgres://... is required (replicas share the log)")
		return 2
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, o, logger); err != nil {
		logger.Error("server failed", "error", err)
		return 1
	}
	return 0
}

// The environment variables the API token is read from, in this order:
// the server's own name, then the one the cursorflow CLI reads, so that
// one variable can serve both.
const (
	envAPIToken = "CURSORFLOW_API_TOKEN"
	envCLIToken = "CURSORFLOW_TOKEN"
)

// resolveToken fills o.token from --token-file or the environment, trims
// it, and refuses an empty one unless --insecure. Presented tokens are
// trimmed too, so a configured one that is not (a secret mounted as an
// environment variable with a trailing newline) would shut everyone out.
func (o *options) resolveToken() error {
	source := "--token"
	if o.tokenFile != "" {
		if o.token != "" {
			return errors.New("--token and --token-file exclude each other")
		}
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		o.token, source = string(b), "--token-file "+o.tokenFile
	}
	for _, name := range []string{envAPIToken, envCLIToken} {
		if o.token != "" {
			break
		}
		o.token, source = os.Getenv(name), name
	}
	given := o.token != ""
	o.token = strings.TrimSpace(o.token)
	switch {
	case given && o.token == "":
		return fmt.Errorf("%s holds only white space: want the token", source)
	case o.token != "" && o.insecure:
		return errors.New("--insecure with a token: drop one of them")
	case o.token == "" && !o.insecure:
		return errors.New("no API token: pass --token-file, --token or " + envAPIToken + " (or " + envCLIToken + "), or --insecure to serve without authentication")
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// serve runs the replica until ctx is done.
func serve(ctx context.Context, o options, logger *slog.Logger) error {
	pcfg, err := pglog.ParsePoolConfig(o.eventlog)
	if err != nil {
		return err
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
	nc, err := natslog.Connect(ctx, o.natsURL, logger, nats.Name("cursorflow-server "+lease.Owner()))
	if err != nil {
		if ctx.Err() != nil {
			// Stopped (SIGTERM) while waiting for NATS: as asked.
			logger.Info("server stopped before NATS answered")
			return nil
		}
		return fmt.Errorf("connect to %s: %w", natslog.Where(o.natsURL), err)
	}
	defer nc.Close()
	store, err := api.NewPostgresStore(ctx, pool, o.schema)
	if err != nil {
		return err
	}
	// Traces and metrics derive from the events the leader appends.
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
	// Status questions read a projection of the log; the leader keeps it
	// (and the snapshots standbys continue from) current.
	proj, err := engine.NewProjection(engine.ProjectionConfig{Log: log, Logger: logger})
	if err != nil {
		return err
	}
	var results *resultstore.Store
	if o.resultStore != "" {
		if results, err = resultstoreurl.Open(ctx, o.resultStore, o.resultThreshold); err != nil {
			return fmt.Errorf("result store: %w", err)
		}
		defer results.Close()
	}
	transport := natsjs.Config{Conn: nc, Prefix: o.prefix, AckWait: o.ackWait, EventAckWait: o.eventAckWait, Logger: logger}
	orch, err := leader.NewOrchestrator(leader.OrchestratorConfig{
		Lease: lease, Log: log, Projection: proj,
		Engine: engine.Config{CommandLease: o.commandLease, Observer: observer, Logger: logger, Results: results},
		NewDispatcher: func(ctx context.Context) (leader.Dispatcher, error) {
			return natsjs.NewDispatcher(ctx, transport)
		},
		WrapDispatcher: observer.WrapDispatcher,
	})
	if err != nil {
		return err
	}
	// Every replica knows the workers (GET /v1/workers), leader or not.
	workers, err := natsjs.NewRegistry(transport)
	if err != nil {
		return err
	}
	defer workers.Close()
	acfg := api.Config{Engine: orch, Log: log, Projection: proj, Playbooks: store, Token: o.token, Logger: logger,
		AllowedHosts: o.allowedHosts, Metrics: metrics, Ready: orch.Ready, Workers: workers}
	if err := acfg.Validate(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := newHTTPServer(api.New(acfg))
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	logger.Info("server listening", "addr", ln.Addr().String(), "replica", lease.Owner(), "auth", o.token != "")

	err = orch.Run(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if herr := <-httpDone; herr != nil && !errors.Is(herr, http.ErrServerClosed) {
		return herr
	}
	return err
}

// newHTTPServer serves h with the server's bounds on slow and idle
// clients. WriteTimeout bounds a response to a client that stops reading
// it; event streams, which outlive it, lift it and bound each of their
// writes instead (api.Config.StreamWriteTimeout).
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: bodyDeadline(h, bodyTimeout), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		WriteTimeout: writeTimeout, MaxHeaderBytes: maxHeaderBytes}
}

// writeTimeout bounds the writing of a response other than an event
// stream (the longest: a page of events, a playbook's source).
const writeTimeout = 2 * time.Minute

// maxHeaderBytes bounds a request's headers, which are read before the
// token is checked: net/http's default (1 MiB) let each unauthenticated
// connection hold a megabyte for ReadHeaderTimeout. A token and a
// browser's cookies fit many times over.
const maxHeaderBytes = 64 << 10

// bodyTimeout bounds the reading of a request's body (a playbook, at most
// a few MiB).
const bodyTimeout = time.Minute

// bodyDeadline gives a request with a body d to send it: a client that
// sends a Content-Length and then stalls (before or after authentication,
// whose refusal still drains the body) no longer holds its connection for
// ever. Requests without a body, the event streams among them, get no
// deadline: an http.Server ReadTimeout would also end those streams.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		h.ServeHTTP(w, r)
	})
}
