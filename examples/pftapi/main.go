// Command pftapi serves the paginated patient API that the PFT flow playbook
// (test_pft_flow_v2.yaml) drains, for manual runs and benchmarks:
//
//	go run ./examples/pftapi -addr 127.0.0.1:5555 -rate-limit 50 &
//	go run ./examples/cursorflow run test_pft_flow_v2.yaml \
//	    --set api_url=http://127.0.0.1:5555 --credential pg_k8s=...
//
// Flags:
//
//	-addr        listen address (default 127.0.0.1:5555)
//	-rate-limit  requests admitted per sliding second, all endpoints but
//	             /health; negative means unlimited (default $PFT_RATE_LIMIT or 50)
//	-fail-rate   fraction of admitted requests answered 500 (default 0)
//	-latency     latency added to every admitted request (default 0)
//	-seed        seed of the failure injection (default 0)
//	-v           log every refused or failed request
//
// It stops gracefully on SIGINT or SIGTERM, letting requests in flight
// finish for up to 10 seconds, and logs its request counters.
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
	"strconv"
	"syscall"
	"time"

	"github.com/cursorflow/cursorflow/internal/pftapi"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pftapi:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("pftapi", flag.ContinueOnError)
	defaultRate := pftapi.DefaultRateLimit
	if v := os.Getenv("PFT_RATE_LIMIT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("PFT_RATE_LIMIT=%q: %w", v, err)
		}
		defaultRate = n
	}
	addr := fs.String("addr", "127.0.0.1:5555", "listen address")
	rate := fs.Int("rate-limit", defaultRate, "requests admitted per sliding second (env PFT_RATE_LIMIT); negative = unlimited")
	failRate := fs.Float64("fail-rate", 0, "fraction of admitted requests answered 500 {\"detail\":\"injected\"}")
	latency := fs.Duration("latency", 0, "latency added to every admitted request")
	seed := fs.Int64("seed", 0, "seed of the failure injection")
	verbose := fs.Bool("v", false, "log every refused or failed request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rate == 0 {
		// Config reads 0 as "the default"; on the command line 0 means nothing
		// is admitted, which is never useful: refuse it rather than guess.
		return errors.New("-rate-limit 0 admits nothing: use a positive limit or -1 for unlimited")
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg := pftapi.Config{
		RateLimit:   *rate,
		FailureRate: *failRate,
		Latency:     *latency,
		Seed:        *seed,
		Logger:      logger,
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	api := pftapi.New(cfg)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("pftapi listening", "addr", ln.Addr().String(), "rate_limit", *rate,
		"fail_rate", *failRate, "latency", *latency)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("pftapi shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	st := api.Stats()
	logger.Info("pftapi stopped", "requests", st.Requests, "answered", st.Answered,
		"rate_limited", st.RateLimited, "injected", st.Injected)
	return nil
}
