// Command bench drains N rows from PostgreSQL through cursor loops and, in
// the same run, through the same SQL in tight pgx loops with the same
// concurrency and no engine, and burns down N no-op jobs with river in the
// same database. It is its own module, so the library does not depend on
// river.
//
//	cd examples/bench && go run . -n 100000
//	cd examples/bench && go run . -heap
//
// Modes, each engine mode run -runs times (default 3). The machine's speed
// drifts from minute to minute, so within a run every engine mode runs
// right beside its base (see schedule: the base before, between and after
// its engine modes), and the order rotates from run to run:
//
//   - baseline-claim: the claim SQL alone, in 8 claimers (the comparison for noop)
//   - noop/LOG:       process: row with a no-op tool (claim and engine overhead only)
//   - baseline-row:   the claim plus per-row UPDATEs (row_concurrency goroutines per claimer)
//   - row/LOG:        process: row with a per-row UPDATE marking the row done
//   - baseline-frame: the claim plus one set-based UPDATE per frame
//   - frame/LOG:      process: frame with one set-based UPDATE per frame
//   - nats-frame/LOG: frame/LOG with the orchestrator dispatching over NATS
//     JetStream to two workers (compared with frame/LOG of the same run)
//   - river:          river burning down N no-op jobs inserted beforehand
//
// LOG is each event log of -eventlog (default sqlite,postgres). Every
// ratio is computed within one run (engine items/s over the mean of its
// base's drains just before and after it, or over the run's river) and
// then summarised over the runs: median [min–max].
// Every drain is checked: the queue must be empty (and every row done
// where the body marks rows), river's table must hold N completed jobs.
//
// -log-delay D holds every append of the engine's log D longer than it
// took (a diagnostic): a frame's claim commits only once its rows are on
// record, so it shows what the log's latency alone, with no extra CPU,
// costs a drain.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/internal/pgcpu"
)

// heapProfile, when set, names a file that receives a heap profile taken
// heapProfileAfter into each engine run (diagnostics only).
var (
	heapProfile      string
	heapProfileAfter time.Duration
)

type config struct {
	dsn          string
	logDSN       string // the postgres event log's database
	sizes        []int
	runs         int
	slots        int
	maxRows      int
	rowConc      int
	logs         []string
	riverWorkers int // 0: no river
	riverCool    time.Duration
	only         []string
	natsURL      string
	nats         bool
	heap         bool
	heapSizes    []int
	// logDelay holds every append of the engine's log this long after it
	// returned (diagnostics only).
	logDelay time.Duration
	// server is the PostgreSQL server's CPU meter when it runs on this
	// machine (else its zero value, which measures nothing).
	server pgcpu.Server
}

func main() {
	var c config
	var sizes, logs, natsMode, heapSizes string
	flag.StringVar(&c.dsn, "dsn", envOr("CURSORFLOW_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL DSN for the queues, river and (unless -eventlog-dsn) the postgres event log")
	flag.StringVar(&c.logDSN, "eventlog-dsn", "", "PostgreSQL DSN for the postgres event log (default: -dsn, the queues' database)")
	flag.StringVar(&sizes, "n", "100000", "comma-separated queue sizes")
	flag.IntVar(&c.runs, "runs", 3, "runs of every mode (interleaved)")
	flag.IntVar(&c.slots, "slots", 8, "max_in_flight: frame slots (and baseline claimers)")
	flag.IntVar(&c.maxRows, "max-rows", 100, "rows per frame")
	flag.IntVar(&c.rowConc, "row-concurrency", 4, "rows run at once per frame (process: row)")
	flag.StringVar(&logs, "eventlog", "sqlite,postgres", "comma-separated event logs for the engine runs: sqlite (a temporary file: the embedded default), postgres (in the queues' database) or memory")
	// river's default FetchCooldown (100ms between fetches) caps a
	// burn-down at about MaxWorkers jobs per 100ms whatever the machine:
	// the anchor takes river's minimum instead, and the MaxWorkers of
	// river's documentation.
	flag.IntVar(&c.riverWorkers, "river-workers", 100, "river's MaxWorkers; 0: no river row")
	flag.DurationVar(&c.riverCool, "river-fetch-cooldown", time.Millisecond, "river's FetchCooldown (0: river's default, 100ms)")
	var only string
	flag.StringVar(&only, "modes", "", "comma-separated modes to run (e.g. frame/sqlite,baseline-frame,river); default all")
	flag.StringVar(&natsMode, "nats", "auto", "nats-frame runs: auto (when NATS answers at -nats-url), on or off")
	flag.StringVar(&c.natsURL, "nats-url", envOr("CURSORFLOW_TEST_NATS", nats.DefaultURL), "NATS URL for the nats-frame runs")
	flag.BoolVar(&c.heap, "heap", false, "instead of the table: the frame mode at each -heap-sizes, peak live heap and its ratio largest/smallest")
	flag.StringVar(&heapSizes, "heap-sizes", "10000,1000000", "queue sizes of -heap")
	flag.StringVar(&heapProfile, "heapprofile", "", "write a heap profile taken -heapprofile-after into each engine run")
	flag.DurationVar(&heapProfileAfter, "heapprofile-after", 5*time.Second, "when to take the heap profile")
	flag.DurationVar(&c.logDelay, "log-delay", 0, "hold every append of the engine's event log this long after it returned (diagnostics: what the log's latency costs a drain)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	allocprofile := flag.String("allocprofile", "", "write an allocation profile of the whole run to this file (where the GC's work comes from)")
	flag.Parse()
	var err error
	if c.logDSN == "" {
		c.logDSN = c.dsn
	}
	if c.sizes, err = parseSizes(sizes); err == nil {
		c.heapSizes, err = parseSizes(heapSizes)
	}
	if err != nil || c.runs < 1 {
		fmt.Fprintf(os.Stderr, "bench: bad -n, -heap-sizes or -runs: %v\n", err)
		os.Exit(2)
	}
	for _, l := range strings.Split(logs, ",") {
		switch l = strings.TrimSpace(l); l {
		case "sqlite", "postgres", "memory":
			c.logs = append(c.logs, l)
		default:
			fmt.Fprintf(os.Stderr, "bench: unknown event log %q\n", l)
			os.Exit(2)
		}
	}
	if only != "" {
		c.only = strings.Split(only, ",")
	}
	switch natsMode {
	case "on":
		c.nats = true
	case "off":
	case "auto":
		if nc, err := nats.Connect(c.natsURL, nats.Timeout(time.Second)); err == nil {
			nc.Close()
			c.nats = true
		} else {
			fmt.Fprintf(os.Stderr, "bench: NATS not reachable at %s (%v): no nats-frame runs\n", c.natsURL, err)
		}
	default:
		fmt.Fprintf(os.Stderr, "bench: -nats %q: want auto, on or off\n", natsMode)
		os.Exit(2)
	}
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
	if *allocprofile != "" {
		defer func() {
			if f, err := os.Create(*allocprofile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	run := runTable
	if c.heap {
		run = runHeap
	}
	if err := run(context.Background(), c, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// result is one mode's one run.
type result struct {
	n       int
	seconds float64
	cpu     time.Duration
	// serverCPU is the PostgreSQL server's CPU time over the run, when
	// measured (serverOK).
	serverCPU time.Duration
	serverOK  bool
	// busy is the share of the machine's CPU time (all CPUs, every
	// process) that was busy over the run; -1 when not measured. Near 1,
	// the run was CPU-bound, and its rate follows the CPU each item
	// costs this process and the servers together.
	busy     float64
	events   int64
	peakHeap uint64
	// allocs is what this process allocated over the run (the heap's
	// bytes, runtime/metrics), and gcs the collections it ran.
	allocs, gcs uint64
	// gcCPU is the runtime's estimate of the CPU time its collector took
	// over the run (runtime/metrics /cpu/classes/gc/total): marking,
	// assists, idle marking and the stop-the-world phases.
	gcCPU time.Duration
	// claimOpen holds each frame's claim-to-commit window in microseconds
	// (engine runs: frame.done's claim_open_us).
	claimOpen []int64
	// appendLat holds the latency of each append to the engine's event
	// log in microseconds (engine runs).
	appendLat []int64
	// run is the run this drain belonged to, and pos its place in that
	// run's schedule.
	run, pos int
}

func (r result) rate() float64 { return float64(r.n) / r.seconds }

// mode is one row of the table.
type mode struct {
	name string // e.g. frame/sqlite
	kind string // baseline-claim, baseline-row, baseline-frame, noop, row, frame, nats-frame, river
	log  string // engine modes: the event log
	base string // the mode whose items/s of the same run this one is divided by
}

func (m mode) engine() bool { return m.kind != "river" && !strings.HasPrefix(m.kind, "baseline-") }

func modesOf(c config) ([]mode, error) {
	var ms []mode
	add := func(base, kind string) {
		ms = append(ms, mode{name: base, kind: base})
		for _, l := range c.logs {
			ms = append(ms, mode{name: kind + "/" + l, kind: kind, log: l, base: base})
		}
	}
	add("baseline-claim", "noop")
	add("baseline-row", "row")
	add("baseline-frame", "frame")
	if c.nats {
		for _, l := range c.logs {
			ms = append(ms, mode{name: "nats-frame/" + l, kind: "nats-frame", log: l, base: "frame/" + l})
		}
	}
	if c.riverWorkers > 0 {
		ms = append(ms, mode{name: "river", kind: "river"})
	}
	if len(c.only) > 0 {
		for _, name := range c.only {
			if !slices.ContainsFunc(ms, func(m mode) bool { return m.name == name }) {
				var names []string
				for _, m := range ms {
					names = append(names, m.name)
				}
				return nil, fmt.Errorf("-modes: no mode %q (modes: %s)", name, strings.Join(names, ", "))
			}
		}
		ms = slices.DeleteFunc(ms, func(m mode) bool { return !slices.Contains(c.only, m.name) })
	}
	return ms, nil
}

// bench is one bench process: its pool and the schema its queues live in.
type bench struct {
	c      config
	pool   *pgxpool.Pool
	schema string
	seq    int // names the queues and per-run schemas
	// noCheckpoint: the server refused CHECKPOINT (see checkpoint).
	noCheckpoint bool
}

func open(ctx context.Context, c config) (*bench, func(), error) {
	pcfg, err := pgxpool.ParseConfig(c.dsn)
	if err != nil {
		return nil, nil, err
	}
	pcfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, err
	}
	schema := fmt.Sprintf("bench_%08x", rand.Uint32())
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		pool.Close()
		return nil, nil, err
	}
	if c.server, err = pgcpu.Of(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return &bench{c: c, pool: pool, schema: schema}, func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	}, nil
}

// runOne runs m once over a fresh queue of n rows and checks the drain.
func (b *bench) runOne(ctx context.Context, m mode, n int) (result, error) {
	b.seq++
	tag := fmt.Sprintf("%s_%d", strings.NewReplacer("-", "_", "/", "_").Replace(m.name), b.seq)
	if m.kind == "river" {
		r, err := riverBurnDown(ctx, b.c, b.schema+"_"+tag, n)
		r.n = n
		return r, err
	}
	table := b.schema + ".q_" + tag
	b.checkpoint(ctx)
	if err := makeQueue(ctx, b.pool, table, n); err != nil {
		return result{}, err
	}
	defer func() { _, _ = b.pool.Exec(context.Background(), "DROP TABLE "+table) }()
	var r result
	var err error
	switch m.kind {
	case "baseline-claim", "baseline-row", "baseline-frame":
		body := strings.TrimPrefix(m.kind, "baseline-")
		r, err = measure(b.c, func() (int64, error) { return 0, baseline(ctx, b.c, table, body) })
	default:
		r, err = viaEngine(ctx, b.c, b.schema+"_ev_"+tag, table, m)
	}
	if err != nil {
		return r, err
	}
	r.n = n
	return r, checkDrained(ctx, b.pool, table, n, m.kind != "noop" && m.kind != "baseline-claim")
}

// checkpoint runs a checkpoint before a mode's queue is made. The first
// change to a page after a checkpoint writes the whole page to the WAL,
// and PostgreSQL starts one for every max_wal_size of WAL (about once a
// minute of this bench): a mode then paid those page images, or not, as
// chance fell, and the log's commits waited for them. After an explicit
// checkpoint the queue's pages are new in this cycle and a mode meets
// another checkpoint only if it writes max_wal_size itself. Without the
// privilege (superuser or pg_checkpoint) the bench runs on and says so
// once.
func (b *bench) checkpoint(ctx context.Context) {
	if b.noCheckpoint {
		return
	}
	if _, err := b.pool.Exec(ctx, "CHECKPOINT"); err != nil {
		b.noCheckpoint = true
		fmt.Fprintf(os.Stderr, "bench: CHECKPOINT refused (%v): modes may meet a checkpoint mid-run\n", err)
	}
}

func runTable(ctx context.Context, c config, out io.Writer) error {
	b, closeBench, err := open(ctx, c)
	if err != nil {
		return err
	}
	defer closeBench()
	modes, err := modesOf(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "cursorflow bench: slots=%d max_rows=%d row_concurrency=%d runs=%d GOMAXPROCS=%d event logs=%s\n",
		c.slots, c.maxRows, c.rowConc, c.runs, runtime.GOMAXPROCS(0), strings.Join(c.logs, ","))
	if c.riverWorkers > 0 {
		cool := "100ms (river's default)"
		if c.riverCool > 0 {
			cool = c.riverCool.String()
		}
		fmt.Fprintf(out, "river: %s MaxWorkers=%d FetchCooldown=%s, river's defaults otherwise\n", riverVersion(), c.riverWorkers, cool)
	}
	if b.c.server.Postmaster() != 0 {
		fmt.Fprintf(out, "PostgreSQL CPU: measured from /proc (postmaster pid %d and its processes)\n", b.c.server.Postmaster())
	} else {
		fmt.Fprintln(out, "PostgreSQL CPU: not measured (the server is not a process this one can see in /proc)")
	}
	if c.nats {
		fmt.Fprintf(out, "nats-frame: orchestrator over JetStream at %s, 2 workers of concurrency 8, each with its own registries and connections\n", c.natsURL)
	}
	fmt.Fprintln(out)
	for _, n := range c.sizes {
		res := map[string][]result{}
		for run := range c.runs {
			for pos, m := range schedule(modes, run, c.runs) {
				r, err := b.runOne(ctx, m, n)
				if err != nil {
					return fmt.Errorf("%s N=%d run %d: %w", m.name, n, run+1, err)
				}
				r.run, r.pos = run, pos
				res[m.name] = append(res[m.name], r)
				fmt.Fprintf(out, "  run %d/%d N=%d %-20s %10s items/s in %6.2fs, cpu %6.1f µs/item (GC %4.1f), pg %6s µs/item, busy %4s, peak live %6.1f MB, alloc %5.0f B/item, %3d GCs\n",
					run+1, c.runs, n, m.name, rateText(r.rate()), r.seconds, cpuPerItem(r), gcPerItem(r), serverText(r), busyText(r.busy), mb(r.peakHeap),
					allocPerItem(r), r.gcs)
			}
		}
		fmt.Fprintln(out)
		printTable(out, c, modes, n, res)
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, "items/s, ratios, CPU: median [min–max] over the drains; every ratio is taken within one run, then summarised.")
	fmt.Fprintln(out, "vs base: items/s over the mean of the base's drains just before and after it in the same run (a base runs")
	fmt.Fprintln(out, "         before, between and after its engine modes; noop: baseline-claim; row: baseline-row; frame:")
	fmt.Fprintln(out, "         baseline-frame; nats-frame: the in-process frame with the same event log, run beside it).")
	fmt.Fprintln(out, "vs river: items/s over the same run's river jobs/s.")
	fmt.Fprintln(out, "CPU: this process's user+system time per item. GC: the part its collector took, as the runtime estimates")
	fmt.Fprintln(out, "it (marking, assists, idle marking, stop-the-world phases). PG CPU: the PostgreSQL server's, all its")
	fmt.Fprintln(out, "processes, per item (whatever else the server did meanwhile included). Busy: share of the machine's CPU")
	fmt.Fprintln(out, "time (all CPUs, every process) busy over the run, median; near 100 % a run is CPU-bound and its rate follows")
	fmt.Fprintln(out, "the CPU per item of this process and the servers together, not latency. Peak live: largest live heap after")
	fmt.Fprintln(out, "a GC over the runs. Alloc: bytes this process allocated per item, median (runtime/metrics; what drives its")
	fmt.Fprintln(out, "collections).")
	fmt.Fprintln(out, "Claim open: per frame, from the claim returning rows to its commit (p50/p99). Append: p50 latency of")
	fmt.Fprintln(out, "an append to the engine's event log (the claim commits only once its rows are on record). Items/append:")
	fmt.Fprintln(out, "items drained per append of the engine's log (group commit: a frame's rows are max_rows items).")
	if c.logDelay > 0 {
		fmt.Fprintf(out, "-log-delay %s: every append of the engine's log was held %s after it returned (in the append column too).\n", c.logDelay, c.logDelay)
	}
	return nil
}

func printTable(out io.Writer, c config, modes []mode, n int, res map[string][]result) {
	fmt.Fprintf(out, "N=%d, %d runs\n", n, c.runs)
	fmt.Fprintf(out, "%-20s %-30s %-16s %-22s %-20s %-20s %-18s %-20s %-6s %9s %12s %11s %14s %10s %12s\n",
		"mode", "items/s", "base", "vs base", "vs river", "CPU µs/item", "GC µs/item", "PG CPU µs/item", "busy", "peak MB", "alloc B/item", "events/item", "claim open µs", "append µs", "items/append")
	for _, m := range modes {
		rs := res[m.name]
		var rates, cpus, gcCPUs, pgCPUs, busy, vsBase, vsRiver, allocs []float64
		var peak uint64
		var events int64
		var p50, p99, appendP50, perAppend []float64
		for _, r := range rs {
			rates = append(rates, r.rate())
			cpus = append(cpus, cpuPerItem(r))
			gcCPUs = append(gcCPUs, gcPerItem(r))
			allocs = append(allocs, allocPerItem(r))
			if r.serverOK {
				pgCPUs = append(pgCPUs, serverPerItem(r))
			}
			if r.busy >= 0 {
				busy = append(busy, r.busy)
			}
			peak = max(peak, r.peakHeap)
			events += r.events
			if base, ok := baseRate(res[m.base], r); ok {
				vsBase = append(vsBase, r.rate()/base)
			}
			if river, ok := sameRun(res["river"], r.run); ok && m.engine() {
				vsRiver = append(vsRiver, r.rate()/river.rate())
			}
			if len(r.claimOpen) > 0 {
				slices.Sort(r.claimOpen)
				p50 = append(p50, float64(percentile(r.claimOpen, 50)))
				p99 = append(p99, float64(percentile(r.claimOpen, 99)))
			}
			if len(r.appendLat) > 0 {
				slices.Sort(r.appendLat)
				appendP50 = append(appendP50, float64(percentile(r.appendLat, 50)))
				perAppend = append(perAppend, float64(r.n)/float64(len(r.appendLat)))
			}
		}
		base, epi, claim, appendLat, itemsPerAppend := "-", "-", "-", "-", "-"
		if m.base != "" {
			base = m.base
		}
		if events > 0 {
			epi = fmt.Sprintf("%.4f", float64(events)/float64(n*len(rs)))
		}
		if len(p50) > 0 {
			claim = fmt.Sprintf("%.0f/%.0f", spreadOf(p50).med, spreadOf(p99).med)
		}
		if len(appendP50) > 0 {
			appendLat = fmt.Sprintf("%.0f", spreadOf(appendP50).med)
			itemsPerAppend = fmt.Sprintf("%.0f", spreadOf(perAppend).med)
		}
		busyMed := "-"
		if len(busy) > 0 {
			busyMed = busyText(spreadOf(busy).med)
		}
		fmt.Fprintf(out, "%-20s %-30s %-16s %-22s %-20s %-20s %-18s %-20s %-6s %9.1f %12.0f %11s %14s %10s %12s\n", m.name,
			spreadOf(rates).format(rateText), base, spreadOf(vsBase).format(ratioText), spreadOf(vsRiver).format(ratioText),
			spreadOf(cpus).format(oneDecimal), spreadOf(gcCPUs).format(oneDecimal), spreadOf(pgCPUs).format(oneDecimal), busyMed, mb(peak), spreadOf(allocs).med,
			epi, claim, appendLat, itemsPerAppend)
	}
}

// heapRepeats bounds the drains of a smaller -heap size (see runHeap).
const heapRepeats = 100

// runHeap runs the frame mode at each heap size with each event log and
// prints the peak live heap of the largest size over that of the
// smallest. A peak is a maximum over the live heaps the collections left,
// so it grows with the number of collections a run sees even when nothing
// accumulates (a drain of 20,000 rows peaked 1.44 times higher than one of
// 10,000): a smaller size is therefore drained again until it has drained
// as many rows as the largest (at most heapRepeats times), and its peak is
// the highest over those drains. The first drain's peak alone is printed
// too, with its ratio.
func runHeap(ctx context.Context, c config, out io.Writer) error {
	b, closeBench, err := open(ctx, c)
	if err != nil {
		return err
	}
	defer closeBench()
	largest := c.heapSizes[len(c.heapSizes)-1]
	fmt.Fprintf(out, "cursorflow bench -heap: frame mode, slots=%d max_rows=%d; a smaller size drained again up to %d rows (at most %d drains)\n\n",
		c.slots, c.maxRows, largest, heapRepeats)
	fmt.Fprintf(out, "%-16s %10s %7s %12s %8s %12s %13s %10s\n", "mode", "N", "drains", "items/s", "seconds", "CPU µs/item", "first peak MB", "peak MB")
	for _, l := range c.logs {
		m := mode{name: "frame/" + l, kind: "frame", log: l}
		var first, peaks []uint64
		for _, n := range c.heapSizes {
			var rs []result
			for drained := 0; len(rs) == 0 || (drained < largest && len(rs) < heapRepeats); drained += n {
				r, err := b.runOne(ctx, m, n)
				if err != nil {
					return fmt.Errorf("%s N=%d: %w", m.name, n, err)
				}
				rs = append(rs, r)
			}
			peak, rates, cpus := uint64(0), make([]float64, len(rs)), make([]float64, len(rs))
			for i, r := range rs {
				peak = max(peak, r.peakHeap)
				rates[i], cpus[i] = r.rate(), cpuPerItem(r)
			}
			first, peaks = append(first, rs[0].peakHeap), append(peaks, peak)
			fmt.Fprintf(out, "%-16s %10d %7d %12s %8.1f %12.1f %13.1f %10.1f\n", m.name, n, len(rs), rateText(spreadOf(rates).med),
				rs[0].seconds, spreadOf(cpus).med, mb(rs[0].peakHeap), mb(peak))
		}
		fmt.Fprintf(out, "%-16s peak live heap N=%d / N=%d: %.2f over as many rows (target ≤ 1.2); first drains only: %.2f\n\n", m.name,
			largest, c.heapSizes[0], float64(peaks[len(peaks)-1])/float64(peaks[0]), float64(first[len(first)-1])/float64(first[0]))
	}
	return nil
}

// allocPerItem is the bytes this process allocated per item over the run.
func allocPerItem(r result) float64 { return float64(r.allocs) / float64(max(r.n, 1)) }

func cpuPerItem(r result) float64 {
	return float64(r.cpu.Microseconds()) / float64(max(r.n, 1))
}

// gcPerItem is the collector's CPU time per item of r (the runtime's
// estimate, part of cpuPerItem's).
func gcPerItem(r result) float64 {
	return float64(r.gcCPU.Microseconds()) / float64(max(r.n, 1))
}

// serverPerItem is the PostgreSQL server's CPU time per item of r.
func serverPerItem(r result) float64 {
	return float64(r.serverCPU.Microseconds()) / float64(max(r.n, 1))
}

// serverText is serverPerItem for a run line, "-" when not measured.
func serverText(r result) string {
	if !r.serverOK {
		return "-"
	}
	return oneDecimal(serverPerItem(r))
}

// busyText prints a busy share as a percentage, "-" when not measured.
func busyText(b float64) string {
	if b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*b)
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// measure runs f, timing it, taking the process's CPU time and sampling the
// peak live heap.
func measure(c config, f func() (int64, error)) (result, error) {
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
	srv0, ok0 := c.server.CPU()
	busy0, total0, okm0 := machineTicks()
	heap := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(heap)
	allocs0, gcs0, gcCPU0 := heap[0].Value.Uint64(), heap[1].Value.Uint64(), heap[2].Value.Float64()
	cpu0 := cpuTime()
	start := time.Now()
	events, err := f()
	secs := time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	metrics.Read(heap)
	allocs, gcs := heap[0].Value.Uint64()-allocs0, heap[1].Value.Uint64()-gcs0
	gcCPU := time.Duration((heap[2].Value.Float64() - gcCPU0) * float64(time.Second))
	srv1, ok1 := c.server.CPU()
	busy1, total1, okm1 := machineTicks()
	close(stop)
	wg.Wait()
	busy := -1.0
	if okm0 && okm1 && total1 > total0 {
		busy = float64(busy1-busy0) / float64(total1-total0)
	}
	return result{seconds: secs, cpu: cpu, serverCPU: srv1 - srv0, serverOK: ok0 && ok1, busy: busy, events: events, peakHeap: peak.Load(),
		allocs: allocs, gcs: gcs, gcCPU: gcCPU}, err
}
