// Command worker runs cursorflow commands that a server (examples/server)
// dispatches over NATS JetStream: it joins a pool, runs up to
// --concurrency commands at once with the standard tools and every cursor
// driver of drivers/ (postgres, sqlite, mysql, redisstream, natsconsumer,
// s3prefix, clickhouse), heartbeats while they run, and reports back.
//
//	worker --nats nats://127.0.0.1:4222 --pool default --concurrency 8 \
//	       --credential pg=postgres://app@db/app
//
// Credentials: --credential alias=URL or alias={"url": ..., ...}
// (repeatable; the alias is letters, digits, _ - .), then the environment
// (CURSORFLOW_CREDENTIAL_<ALIAS>=URL). They never leave the worker, and
// the worker never prints them, not even in an error about their form.
//
// The python and shell tools run whatever code a playbook carries, and
// duckdb reads and writes local files, with this process's rights: they
// are off unless --allow-code is given. So is a cursor's url: option (a
// sqlite path is any local file; postgres:// and s3:// send the
// environment's credentials where the url points): without
// --allow-code a cursor names its source with auth: and a keychain alias. Give
// it only to workers whose server accepts playbooks from people trusted
// to run code there (see the README's trust model).
//
// The worker reports its capacity (pool, labels, free slots) every
// --capacity-every; the server lists it at GET /v1/workers. --label
// key=value (repeatable) labels it: steps whose spec.worker_labels it has
// are sent to it while it is alive.
//
// --result-store must name the server's result store (results over
// --result-threshold go there; the reports carry references).
//
// SIGTERM or SIGINT stops it gracefully: no new commands are fetched,
// running ones get --grace to finish, and the rest are handed back to be
// run elsewhere. The playbook tool (sub-playbooks) needs an engine and is
// not available on a remote worker.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/examples/internal/credflag"
	"github.com/cursorflow/cursorflow/examples/internal/liblog"
	"github.com/cursorflow/cursorflow/examples/internal/natslog"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"
	"github.com/cursorflow/cursorflow/tools"
)

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	// go-redis and the MySQL driver log through package-level loggers:
	// route them through the worker's logger (run sets it).
	liblog.Install()
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		credentials   multiFlag
		natsURL       = fs.String("nats", envOr("CURSORFLOW_NATS", nats.DefaultURL), "NATS URL; env CURSORFLOW_NATS")
		prefix        = fs.String("prefix", natsjs.DefaultPrefix, "prefix of the NATS subjects, streams and bucket (as the server's)")
		pool          = fs.String("pool", natsjs.DefaultPool, "worker pool to serve (a step picks one with spec.pool)")
		concurrency   = fs.Int("concurrency", natsjs.DefaultConcurrency, "commands run at once")
		grace         = fs.Duration("grace", natsjs.DefaultGrace, "on SIGTERM, how long running commands may finish before they are handed back")
		ackWait       = fs.Duration("ack-wait", natsjs.DefaultAckWait, "JetStream AckWait of command messages (as the server's)")
		reportTimeout = fs.Duration("report-timeout", natsjs.DefaultReportTimeout, "how long to wait for the orchestrator to record a frame's claim")
		maxChain      = fs.Int("max-chain", engine.DefaultMaxChain, "frames in a row a cursor slot runs here, each claimed with the report of the one before, before its next frame is dispatched again (spreads frames over workers that join); negative: no bound")
		id            = fs.String("id", "", "worker id in events (default w-<host>-<random>)")
		verbose       = fs.Bool("v", false, "log at debug level")
		allowCode     = fs.Bool("allow-code", false, "enable the python, shell and duckdb tools and cursor url: options: any playbook the server accepts may then run code, touch files and use this process's environment credentials (PGPASSWORD, ~/.pgpass, AWS_*) here")
	)
	fs.Var(&credentials, "credential", "map a keychain alias (letters, digits, _ - .) to a connection URL: "+credflag.Form+" as in CURSORFLOW_CREDENTIAL_<ALIAS>; repeatable")
	var labelFlags multiFlag
	fs.Var(&labelFlags, "label", "label this worker for steps with spec.worker_labels: key=value; repeatable")
	capacityEvery := fs.Duration("capacity-every", natsjs.DefaultCapacityEvery, "how often the worker reports its capacity")
	resultStore := fs.String("result-store", os.Getenv("CURSORFLOW_RESULT_STORE"), "result store for results over --result-threshold, the server's (s3://..., file:///shared/dir); env CURSORFLOW_RESULT_STORE")
	resultThreshold := fs.Int64("result-threshold", resultstore.DefaultThreshold, "results larger than this many bytes (JSON) go to the result store")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	liblog.Use(logger)
	// The values are secrets: credflag's errors never quote them.
	static, err := credflag.Keychain(credentials)
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}
	labels := map[string]string{}
	for _, kv := range labelFlags {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			fmt.Fprintf(stderr, "worker: --label %q: want key=value\n", kv)
			return 2
		}
		labels[k] = v
	}
	kc := tools.ChainKeychain{static, tools.EnvKeychain{}}
	if *id == "" {
		host, _ := os.Hostname()
		// The id names the worker's own subject: keep it a subject token.
		*id = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
				return r
			}
			return '-'
		}, "w-"+host+"-"+uuid.NewString()[:8])
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	nc, err := natslog.Connect(ctx, *natsURL, logger, nats.Name("cursorflow-worker "+*id))
	if err != nil {
		if ctx.Err() != nil {
			// Stopped (SIGTERM) while waiting for NATS: as asked.
			logger.Info("worker stopped before NATS answered", "id", *id)
			return 0
		}
		logger.Error("connect to NATS", "url", natslog.Where(*natsURL), "error", err)
		return 1
	}
	defer nc.Close()
	var results *resultstore.Store
	if *resultStore != "" {
		if results, err = resultstoreurl.Open(ctx, *resultStore, *resultThreshold); err != nil {
			logger.Error("result store", "error", err)
			return 1
		}
		defer results.Close()
	}
	treg, creg, closer := stdwire.Registries(kc, logger, *allowCode)
	defer closer.Close()
	w, err := natsjs.NewWorker(ctx, natsjs.Config{Conn: nc, Prefix: *prefix, AckWait: *ackWait, ReportTimeout: *reportTimeout, Logger: logger},
		natsjs.WorkerOptions{
			Worker: &engine.Worker{ID: *id, Tools: treg, Cursors: creg, Keychain: kc, Logger: logger, Results: results, MaxChain: *maxChain,
				AllowCursorURL: *allowCode},
			Pool: *pool, Concurrency: *concurrency, Grace: *grace, Labels: labels, CapacityEvery: *capacityEvery,
		})
	if err != nil {
		logger.Error("worker", "error", err)
		return 1
	}
	logger.Info("worker running", "id", *id, "pool", *pool, "concurrency", *concurrency, "labels", labels, "code_tools", *allowCode)
	started := time.Now()
	if err := w.Run(ctx); err != nil {
		logger.Error("worker", "error", err)
		return 1
	}
	s := w.Stats()
	logger.Info("worker stopped", "id", *id, "uptime", time.Since(started).Round(time.Millisecond),
		"executed", s.Executed.Load(), "redelivered", s.Redelivered.Load(), "dropped", s.Dropped.Load(),
		"abandoned", s.Abandoned.Load(), "failed", s.Failed.Load())
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
