// Command bench drains N rows from PostgreSQL through a cursor loop and,
// in the same run, through the same claim and mark-done SQL in a tight
// pgx loop with the same concurrency and no engine. It prints items/s for
// each, the engine/baseline ratios, event rows per item and peak heap.
//
//	go run ./examples/bench -dsn postgres://postgres@127.0.0.1:5432/test -n 10000,500000
//
// Three engine bodies are measured:
//   - noop:  process: row with a no-op tool (claim and engine overhead only)
//   - row:   process: row with a per-row UPDATE marking the row done
//   - frame: process: frame with one set-based UPDATE per frame
//
// and two baselines: the claim plus per-row UPDATEs (row_concurrency
// goroutines per slot), and the claim plus one set-based UPDATE per frame.
// The baselines commit each claim at once; the engine keeps a claim's
// transaction open until frame.claimed is recorded, so for the engine runs
// it also prints the p50 and p99 of that window per frame (claim to
// commit, from frame.done's claim_open_us).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
	sqlitelog "github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/tools"
)

// heapProfile, when set, names a file that receives a heap profile taken
// heapProfileAfter into each engine run (diagnostics only).
var (
	heapProfile      string
	heapProfileAfter time.Duration
)

type config struct {
	dsn         string
	sizes       []int
	slots       int
	maxRows     int
	rowConc     int
	eventlogURL string
}

func main() {
	var c config
	var sizes string
	flag.StringVar(&c.dsn, "dsn", envOr("CURSORFLOW_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL DSN for the queue and the event log")
	flag.StringVar(&sizes, "n", "10000,500000", "comma-separated queue sizes")
	flag.IntVar(&c.slots, "slots", 8, "max_in_flight: frame slots (and baseline claimers)")
	flag.IntVar(&c.maxRows, "max-rows", 100, "rows per frame")
	flag.IntVar(&c.rowConc, "row-concurrency", 4, "rows run at once per frame (process: row)")
	flag.StringVar(&c.eventlogURL, "eventlog", "sqlite", "event log for the engine runs: postgres (in the queue's database), sqlite (a temporary file: the embedded default) or memory")
	flag.StringVar(&heapProfile, "heapprofile", "", "write a heap profile taken -heapprofile-after into each engine run")
	flag.DurationVar(&heapProfileAfter, "heapprofile-after", 5*time.Second, "when to take the heap profile")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if heapProfile != "" {
		runtime.MemProfileRate = 16 << 10
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(2)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: bad -n %q\n", s)
			os.Exit(2)
		}
		c.sizes = append(c.sizes, n)
	}
	if err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type result struct {
	name     string
	n        int
	seconds  float64
	events   int64
	peakHeap uint64
	// claimOpen holds each frame's claim-to-commit window in microseconds
	// (engine runs: frame.done's claim_open_us).
	claimOpen []int64
}

// percentile returns the p-th percentile (0..100) of sorted values.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func (r result) rate() float64 { return float64(r.n) / r.seconds }

func run(ctx context.Context, c config, out io.Writer) error {
	pcfg, err := pgxpool.ParseConfig(c.dsn)
	if err != nil {
		return err
	}
	// As many connections as the engine's own pools use by default: the
	// cursor driver's 8 and the postgres tool's 16.
	pcfg.MaxConns = 24
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	schema := fmt.Sprintf("bench_%d", rand.Uint32())
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return err
	}
	defer func() {
		bg := context.Background()
		_, _ = pool.Exec(bg, "DROP SCHEMA "+schema+" CASCADE")
		for _, m := range []string{"row", "frame", "noop"} {
			_, _ = pool.Exec(bg, "DROP SCHEMA IF EXISTS "+schema+"_events_"+m+" CASCADE")
		}
	}()

	fmt.Fprintf(out, "cursorflow bench: slots=%d max_rows=%d row_concurrency=%d GOMAXPROCS=%d\n\n", c.slots, c.maxRows, c.rowConc, runtime.GOMAXPROCS(0))
	fmt.Fprintf(out, "%-8s %-16s %10s %10s %10s %12s %12s %22s\n", "N", "run", "items/s", "ratio", "seconds", "events/item", "peak live", "claim open p50/p99 µs")
	for _, n := range c.sizes {
		var rs []result
		for _, mode := range []string{"baseline-row", "row", "baseline-frame", "frame", "noop"} {
			table := fmt.Sprintf("%s.q_%s_%d", schema, strings.ReplaceAll(mode, "-", "_"), n)
			if err := makeQueue(ctx, pool, table, n); err != nil {
				return err
			}
			var r result
			var err error
			var open []int64
			switch mode {
			case "baseline-row":
				r, err = measure(func() (int64, error) { return 0, baseline(ctx, c.dsn, c, table, false) })
			case "baseline-frame":
				r, err = measure(func() (int64, error) { return 0, baseline(ctx, c.dsn, c, table, true) })
			default:
				r, err = measure(func() (int64, error) {
					var events int64
					var err error
					events, open, err = viaEngine(ctx, pool, c, schema, table, mode)
					return events, err
				})
				r.claimOpen = open
			}
			if err != nil {
				return fmt.Errorf("%s N=%d: %w", mode, n, err)
			}
			if err := checkDrained(ctx, pool, table, n, mode != "noop"); err != nil {
				return fmt.Errorf("%s N=%d: %w", mode, n, err)
			}
			r.name, r.n = mode, n
			rs = append(rs, r)
			ratio := ""
			switch mode {
			case "row":
				ratio = fmt.Sprintf("%.2f", r.rate()/rs[0].rate())
			case "frame":
				ratio = fmt.Sprintf("%.2f", r.rate()/rs[2].rate())
			case "noop":
				ratio = fmt.Sprintf("%.2f", r.rate()/rs[2].rate())
			}
			epi := "-"
			if r.events > 0 {
				epi = fmt.Sprintf("%.4f", float64(r.events)/float64(n))
			}
			claim := "-"
			if len(r.claimOpen) > 0 {
				slices.Sort(r.claimOpen)
				claim = fmt.Sprintf("%d/%d", percentile(r.claimOpen, 50), percentile(r.claimOpen, 99))
			}
			fmt.Fprintf(out, "%-8d %-16s %10.0f %10s %10.2f %12s %10.1fMB %22s\n", n, mode, r.rate(), ratio, r.seconds, epi, float64(r.peakHeap)/(1<<20), claim)
			if _, err := pool.Exec(ctx, "DROP TABLE "+table); err != nil {
				return err
			}
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, "ratio: engine items/s over its baseline (row vs baseline-row; frame and noop vs baseline-frame)")
	fmt.Fprintln(out, "claim open: per frame, from the claim returning rows to its commit (the frame.claimed record's round trip plus COMMIT),")
	fmt.Fprintln(out, "            the window a claim's transaction stays open; the baselines commit their claims at once")
	return nil
}

// measure runs f, timing it and sampling the peak live heap.
func measure(f func() (int64, error)) (result, error) {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		// The live heap as of the last GC: what the run retains, without the
		// garbage a collection cycle has not reclaimed yet.
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	start := time.Now()
	events, err := f()
	secs := time.Since(start).Seconds()
	close(stop)
	wg.Wait()
	return result{seconds: secs, events: events, peakHeap: peak.Load()}, err
}

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

func checkDrained(ctx context.Context, pool *pgxpool.Pool, table string, n int, wantDone bool) error {
	var done, pending int
	err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'pending') FROM %s`, table)).Scan(&done, &pending)
	if err != nil {
		return err
	}
	if pending != 0 || (wantDone && done != n) {
		return fmt.Errorf("queue not drained: %d done, %d pending of %d", done, pending, n)
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
// as the engine, and nothing else.
//
// Like the engine, it claims through one pool (the cursor driver's 8
// connections) and marks rows done through another (the postgres tool's
// 16), so both sides queue for connections alike.
func baseline(ctx context.Context, dsn string, c config, table string, perFrame bool) error {
	claims, err := poolOf(ctx, dsn, 8)
	if err != nil {
		return err
	}
	defer claims.Close()
	bodies, err := poolOf(ctx, dsn, 16)
	if err != nil {
		return err
	}
	defer bodies.Close()
	var wg sync.WaitGroup
	errs := make(chan error, c.slots)
	for s := 0; s < c.slots; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				rows, err := claims.Query(ctx, claimSQL(table, strconv.Itoa(c.maxRows)), pgx.QueryExecModeSimpleProtocol)
				if err != nil {
					errs <- err
					return
				}
				type row struct {
					ID      int64  `json:"id"`
					Payload string `json:"payload"`
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
				if perFrame {
					b, _ := json.Marshal(claimed)
					lit := "'" + string(b) + "'" // ids only: nothing to escape
					if _, err := bodies.Exec(ctx, markFrameSQL(table, lit), pgx.QueryExecModeSimpleProtocol); err != nil {
						errs <- err
						return
					}
					continue
				}
				sem := make(chan struct{}, c.rowConc)
				var rw sync.WaitGroup
				for _, r := range claimed {
					sem <- struct{}{}
					rw.Add(1)
					go func() {
						defer rw.Done()
						defer func() { <-sem }()
						if _, err := bodies.Exec(ctx, markRowSQL(table, strconv.FormatInt(r.ID, 10)), pgx.QueryExecModeSimpleProtocol); err != nil {
							select {
							case errs <- err:
							default:
							}
						}
					}()
				}
				rw.Wait()
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// viaEngine drains table through the engine and returns the events the
// execution wrote and every frame's claim-to-commit window (µs).
func viaEngine(ctx context.Context, pool *pgxpool.Pool, c config, schema, table, mode string) (int64, []int64, error) {
	var log eventlog.Log = eventlog.NewMemory()
	switch c.eventlogURL {
	case "memory":
	case "sqlite":
		dir, err := os.MkdirTemp("", "cursorflow-bench-")
		if err != nil {
			return 0, nil, err
		}
		defer os.RemoveAll(dir)
		sl, err := sqlitelog.Open(ctx, filepath.Join(dir, "events.db"), sqlitelog.Config{})
		if err != nil {
			return 0, nil, err
		}
		log = sl
	default:
		pl, err := pglog.Open(ctx, c.dsn, pglog.Config{Schema: schema + "_events_" + mode})
		if err != nil {
			return 0, nil, err
		}
		log = pl
	}
	defer log.Close()
	kc := tools.StaticURLs(map[string]string{"pg": c.dsn})
	treg, creg, closer := stdwire.Registries(kc, slog.New(slog.DiscardHandler), false)
	defer closer.Close()
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return 0, nil, err
	}
	defer e.Close()
	process, body := "row", "\n      kind: noop"
	switch mode {
	case "row":
		body = "\n      kind: postgres\n      auth: pg\n      command: |\n        " + markRowSQL(table, "{{ iter.job.id }}")
	case "frame":
		process = "frame"
		body = "\n      kind: postgres\n      auth: pg\n      command: |\n        " + markFrameSQL(table, `{{ iter.job | tojson | sql_literal }}`)
	}
	src := fmt.Sprintf(`apiVersion: noetl.io/v2
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
        frame: {max_rows: %d, row_concurrency: %d, process: %s}
    tool: %s
`, mode, claimSQL(table, "{{ __frame_max_rows }}"), c.slots, c.maxRows, c.rowConc, process, body)
	id, err := e.Start(ctx, []byte(src), engine.StartOptions{File: "bench.yaml"})
	if err != nil {
		return 0, nil, err
	}
	if heapProfile != "" {
		go func() {
			time.Sleep(heapProfileAfter)
			f, err := os.Create(heapProfile)
			if err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
			}
		}()
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if sum.Status != engine.StatusCompleted {
		return 0, nil, fmt.Errorf("execution %s: %s at %s: %s", sum.Status, sum.Step, sum.Field, sum.Error)
	}
	// Count in pages: reading the whole history at once would itself be
	// the run's peak memory.
	var count, after int64
	var open []int64
	for {
		evs, err := log.Read(ctx, id, after, 50)
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
