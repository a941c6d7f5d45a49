package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
	"github.com/cursorflow/cursorflow/eventlog"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
	sqlitelog "github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/tools"
)

func poolOf(ctx context.Context, dsn string, conns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = conns
	return pgxpool.NewWithConfig(ctx, cfg)
}

func makeQueue(ctx context.Context, pool *pgxpool.Pool, table string, n int) error {
	_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s (id bigint PRIMARY KEY, payload text NOT NULL,
		status text NOT NULL DEFAULT 'pending', claimed_at timestamptz, done_at timestamptz);
		INSERT INTO %[1]s (id, payload) SELECT g, 'payload-' || g FROM generate_series(1, %[2]d) g;
		CREATE INDEX ON %[1]s (id) WHERE status = 'pending';
		ANALYZE %[1]s`, table, n))
	return err
}

// checkDrained checks that no row of table is pending and, with wantDone,
// that all n are done.
func checkDrained(ctx context.Context, pool *pgxpool.Pool, table string, n int, wantDone bool) error {
	var done, pending, total int
	err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'pending'), count(*) FROM %s`, table)).Scan(&done, &pending, &total)
	if err != nil {
		return err
	}
	if total != n || pending != 0 || (wantDone && done != n) {
		return fmt.Errorf("queue not drained: %d done, %d pending of %d (want %d)", done, pending, total, n)
	}
	return nil
}

func claimSQL(table, max string) string {
	return fmt.Sprintf(`WITH c AS (SELECT id FROM %[1]s WHERE status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT %[2]s) `+
		`UPDATE %[1]s q SET status = 'claimed', claimed_at = now() FROM c WHERE q.id = c.id RETURNING q.id, q.payload`, table, max)
}

func markRowSQL(table, id string) string {
	return fmt.Sprintf(`UPDATE %s SET status = 'done', done_at = now() WHERE id = %s`, table, id)
}

// markFrameSQL marks a frame's rows done; rowsLiteral is an SQL literal
// of the rows' JSON.
func markFrameSQL(table, rowsLiteral string) string {
	return fmt.Sprintf(`UPDATE %s q SET status = 'done', done_at = now() FROM jsonb_to_recordset(%s::jsonb) AS r(id bigint) WHERE q.id = r.id`, table, rowsLiteral)
}

// baseline drains the queue with the same SQL, slots and row concurrency
// as the engine, and nothing else. body is "claim" (the claim alone),
// "row" (an UPDATE per row) or "frame" (one set-based UPDATE per claim).
//
// Like the engine, it claims through one pool (the cursor driver's 8
// connections) and marks rows done through another (the postgres tool's
// 16), so both sides queue for connections alike.
func baseline(ctx context.Context, c config, table, body string) error {
	claims, err := poolOf(ctx, c.dsn, 8)
	if err != nil {
		return err
	}
	defer claims.Close()
	bodies, err := poolOf(ctx, c.dsn, 16)
	if err != nil {
		return err
	}
	defer bodies.Close()
	var wg sync.WaitGroup
	errs := make(chan error, c.slots)
	type row struct {
		ID      int64  `json:"id"`
		Payload string `json:"payload"`
	}
	for range c.slots {
		wg.Go(func() {
			for {
				rows, err := claims.Query(ctx, claimSQL(table, strconv.Itoa(c.maxRows)), pgx.QueryExecModeSimpleProtocol)
				if err != nil {
					errs <- err
					return
				}
				var claimed []row
				for rows.Next() {
					var r row
					if err := rows.Scan(&r.ID, &r.Payload); err != nil {
						rows.Close()
						errs <- err
						return
					}
					claimed = append(claimed, r)
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					errs <- err
					return
				}
				if len(claimed) == 0 {
					return
				}
				switch body {
				case "claim":
				case "frame":
					b, _ := json.Marshal(claimed)
					lit := "'" + string(b) + "'" // ids and payload-<n>: nothing to escape
					if _, err := bodies.Exec(ctx, markFrameSQL(table, lit), pgx.QueryExecModeSimpleProtocol); err != nil {
						errs <- err
						return
					}
				default:
					sem := make(chan struct{}, c.rowConc)
					var rw sync.WaitGroup
					for _, r := range claimed {
						sem <- struct{}{}
						rw.Go(func() {
							defer func() { <-sem }()
							if _, err := bodies.Exec(ctx, markRowSQL(table, strconv.FormatInt(r.ID, 10)), pgx.QueryExecModeSimpleProtocol); err != nil {
								select {
								case errs <- err:
								default:
								}
							}
						})
					}
					rw.Wait()
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// openLog opens the event log of one engine run; logSchema is the postgres
// log's schema, dropped by the returned cleanup.
func openLog(ctx context.Context, c config, name, logSchema string) (eventlog.Log, func(), error) {
	switch name {
	case "memory":
		l := eventlog.NewMemory()
		return l, func() { _ = l.Close() }, nil
	case "sqlite":
		dir, err := os.MkdirTemp("", "cursorflow-bench-")
		if err != nil {
			return nil, nil, err
		}
		l, err := sqlitelog.Open(ctx, filepath.Join(dir, "events.db"), sqlitelog.Config{})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, nil, err
		}
		return l, func() { _ = l.Close(); _ = os.RemoveAll(dir) }, nil
	default:
		l, err := pglog.Open(ctx, c.logDSN, pglog.Config{Schema: logSchema})
		if err != nil {
			return nil, nil, err
		}
		return l, func() {
			_ = l.Close()
			if p, err := poolOf(context.Background(), c.logDSN, 1); err == nil {
				_, _ = p.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+logSchema+" CASCADE")
				p.Close()
			}
		}, nil
	}
}

// playbook is the engine's drain of table in mode kind (noop, row, frame).
func playbook(c config, table, kind string) string {
	body := "\n      kind: noop"
	frame := fmt.Sprintf("max_rows: %d, row_concurrency: %d, process: row", c.maxRows, c.rowConc)
	switch kind {
	case "row":
		body = "\n      kind: postgres\n      auth: pg\n      command: |\n        " + markRowSQL(table, "{{ iter.job.id }}")
	case "frame", "nats-frame":
		// One call a frame: row_concurrency is process: row's only.
		frame = fmt.Sprintf("max_rows: %d, process: frame", c.maxRows)
		body = "\n      kind: postgres\n      auth: pg\n      command: |\n        " + markFrameSQL(table, `{{ iter.job | tojson | sql_literal }}`)
	}
	return fmt.Sprintf(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: bench-%s}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          %s
      iterator: job
      spec:
        mode: cursor
        max_in_flight: %d
        frame: {%s}
    tool: %s
`, kind, claimSQL(table, "{{ __frame_max_rows }}"), c.slots, frame, body)
}

// viaEngine drains table through an engine with m's event log (and, for
// nats-frame, NATS workers), timing from Start to the execution's end;
// the setup before and the reading of the log after are not timed. It
// returns the run with the events the execution wrote, every frame's
// claim-to-commit window and every append's latency (µs).
func viaEngine(ctx context.Context, c config, logSchema, table string, m mode) (result, error) {
	inner, closeLog, err := openLog(ctx, c, m.log, logSchema)
	if err != nil {
		return result{}, err
	}
	defer closeLog()
	log := &timedLog{Log: inner, timed: !c.heap, delay: c.logDelay}
	kc := tools.StaticURLs(map[string]string{"pg": c.dsn})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ecfg := engine.Config{Log: log, Keychain: kc, Logger: logger}
	if m.kind == "nats-frame" {
		d, stop, err := natsWorkers(ctx, c, kc, logger)
		if err != nil {
			return result{}, err
		}
		defer stop()
		ecfg.Workers, ecfg.Dispatcher = 0, d
	} else {
		treg, creg, closer := stdwire.Registries(kc, slog.New(slog.DiscardHandler), false)
		defer closer.Close()
		ecfg.Tools, ecfg.Cursors = treg, creg
	}
	e, err := engine.New(ecfg)
	if err != nil {
		return result{}, err
	}
	defer e.Close()
	if d, ok := ecfg.Dispatcher.(*natsjs.Dispatcher); ok {
		sctx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- d.Serve(sctx, e.Reporter()) }()
		defer func() {
			stop()
			if err := <-served; err != nil {
				logger.Warn("natsjs: Serve", "error", err)
			}
		}()
	}
	src := []byte(playbook(c, table, m.kind))
	var id string
	r, err := measure(c, func() (int64, error) {
		var err error
		if id, err = e.Start(ctx, src, engine.StartOptions{File: "bench.yaml"}); err != nil {
			return 0, err
		}
		if heapProfile != "" {
			go writeHeapProfile()
		}
		sum, err := e.Wait(ctx, id)
		if err != nil {
			return 0, err
		}
		if sum.Status != engine.StatusCompleted {
			return 0, fmt.Errorf("execution %s: %s at %s: %s", sum.Status, sum.Step, sum.Field, sum.Error)
		}
		return 0, nil
	})
	if err != nil {
		return r, err
	}
	r.appendLat = log.latencies()
	r.events, r.claimOpen, err = countEvents(ctx, log, id)
	return r, err
}

func writeHeapProfile() {
	time.Sleep(heapProfileAfter)
	f, err := os.Create(heapProfile)
	if err == nil {
		_ = pprof.WriteHeapProfile(f)
		_ = f.Close()
	}
}

// countEvents reads the execution's history in pages (the whole of it at
// once would itself be the run's peak memory) and returns its length and
// every frame.done's claim_open_us.
func countEvents(ctx context.Context, log eventlog.Log, id string) (int64, []int64, error) {
	var count, after int64
	var open []int64
	for {
		evs, err := log.Read(ctx, id, after, 500)
		if err != nil {
			return 0, nil, err
		}
		if len(evs) == 0 {
			return count, open, nil
		}
		count += int64(len(evs))
		after = evs[len(evs)-1].Seq
		for _, ev := range evs {
			if ev.Type != eventlog.TypeFrameDone {
				continue
			}
			var p struct {
				ClaimOpenUs int64 `json:"claim_open_us"`
			}
			if json.Unmarshal(ev.Payload, &p) == nil && p.ClaimOpenUs > 0 {
				open = append(open, p.ClaimOpenUs)
			}
		}
	}
}

// natsWorkers starts a JetStream dispatcher under a fresh prefix and two
// workers, each with its own NATS connection, tool and cursor registries
// and database pools, and waits until both report their capacity. stop
// ends the workers, closes the dispatcher and deletes the prefix's
// streams and bucket.
func natsWorkers(ctx context.Context, c config, kc tools.Keychain, logger *slog.Logger) (*natsjs.Dispatcher, func(), error) {
	var cleanups []func()
	stop := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	nc, err := nats.Connect(c.natsURL, nats.Name("cursorflow-bench orchestrator"))
	if err != nil {
		return nil, nil, err
	}
	cleanups = append(cleanups, nc.Close)
	cfg := natsjs.Config{Conn: nc, Prefix: fmt.Sprintf("bench%08x", rand.Uint32()), Logger: logger}
	cleanups = append(cleanups, func() { _ = natsjs.Delete(context.Background(), cfg) })
	d, err := natsjs.NewDispatcher(ctx, cfg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	cleanups = append(cleanups, func() { _ = d.Close() })
	wctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	cleanups = append(cleanups, func() { cancel(); wg.Wait() })
	for i := range 2 {
		wnc, err := nats.Connect(c.natsURL, nats.Name(fmt.Sprintf("cursorflow-bench worker %d", i+1)))
		if err != nil {
			stop()
			return nil, nil, err
		}
		cleanups = append(cleanups, wnc.Close)
		treg, creg, closer := stdwire.Registries(kc, slog.New(slog.DiscardHandler), false)
		cleanups = append(cleanups, func() { _ = closer.Close() })
		w, err := natsjs.NewWorker(ctx, natsjs.Config{Conn: wnc, Prefix: cfg.Prefix, Logger: logger}, natsjs.WorkerOptions{
			Worker:      &engine.Worker{ID: fmt.Sprintf("bench-w%d", i+1), Tools: treg, Cursors: creg, Keychain: kc, Logger: logger},
			Concurrency: natsjs.DefaultConcurrency,
		})
		if err != nil {
			stop()
			return nil, nil, err
		}
		wg.Go(func() { _ = w.Run(wctx) })
	}
	// Both workers announce their capacity as they start: wait for it, so
	// the timed run does not include their start-up.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws, err := d.Workers(ctx)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("nats workers: %w", err)
		}
		if len(ws) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("nats workers did not report within 10s (%d seen)", len(ws))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return d, stop, nil
}

// riverVersion is the river module this binary was built with.
func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == "github.com/riverqueue/river" {
				return "river " + dep.Version
			}
		}
	}
	return "river"
}
