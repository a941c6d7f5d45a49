package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	sqlitelog "github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/internal/faultpoint"
)

// chaosPlaybook is the drain a new user writes from the cursor-loop
// design: the natural claim (no reclaim clause, no slot tag, no release
// statement) and one UPDATE per row. runs counts how often each row's
// body ran.
const chaosPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: chaos-drain}
workload: {table: items}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: |
          WITH c AS (
            SELECT id FROM {{ table }} WHERE status = 'pending'
             ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
          UPDATE {{ table }} q SET status = 'claimed' FROM c WHERE q.id = c.id RETURNING q.id
      iterator: job
      spec:
        mode: cursor
        max_in_flight: %d
        frame: {max_rows: 10, row_concurrency: 2, lease_seconds: 2}
    tool:
      kind: postgres
      auth: pg
      command: UPDATE {{ table }} SET status = 'done', done_count = done_count + 1 WHERE id = {{ iter.job.id }}
`

// A fault is where a trial hurts the run: a fault point that SIGKILLs the
// process that reaches it (see internal/faultpoint), or a SIGTERM.
type fault struct {
	point string
	// hits bounds the countdown: the point fires at a hit drawn from
	// [lo, hi] (for a NATS worker, which sees about half the frames, half
	// of it). hi 0 is half the trial's frames: the orchestrator appends
	// about once per frame (a frame's done and the next claim share an
	// append, and reports arriving together share one), so a drain of 224
	// rows on three slots made only 28 appends and a fixed bound of 40
	// let the drain finish before its fault.
	lo, hi int
}

const sigterm = "sigterm"

var faults = []fault{
	{faultpoint.FrameClaimed, 2, 12},
	{faultpoint.FrameRecorded, 2, 12},
	{faultpoint.FrameRow, 10, 120},
	{faultpoint.FrameRan, 2, 12},
	{faultpoint.OrchestratorAppended, 4, 0},
	{sigterm, 0, 0},
}

// trial is one randomized run with one fault.
type trial struct {
	mode        string // inproc or nats
	fault       fault
	after       int // the hit at which the point fires
	rows        int
	maxInFlight int
}

func (tr trial) String() string {
	return fmt.Sprintf("%s/%s@%d/rows=%d/slots=%d", tr.mode, tr.fault.point, tr.after, tr.rows, tr.maxInFlight)
}

// outcome is what a trial measured.
type outcome struct {
	duplicates int           // body runs beyond one per row
	reissue    time.Duration // a killed worker's death to its frame's re-issue (NATS worker kills)
}

// TestChaosDrain drains a queue through the natural claim with a fault
// injected where it hurts, in 24 randomized trials: in one process
// (cursorflow run, killed, then cursorflow resume) and distributed (two
// server replicas and two workers over NATS), each fault twice per mode.
// Every trial must see its fault fire, every row's body run at least
// once, no row left claimed and loop.done recorded once; it reports the
// body's duplicate runs. Set CURSORFLOW_CHAOS_SEED to replay a run.
func TestChaosDrain(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CURSORFLOW_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CURSORFLOW_CHAOS_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with CURSORFLOW_CHAOS_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	serverBin, workerBin, cliBin := faultBinaries(t)

	var trials []trial
	for _, mode := range []string{"inproc", "nats"} {
		for _, f := range faults {
			for range 2 {
				tr := trial{mode: mode, fault: f, rows: 200 + rng.IntN(201), maxInFlight: 2 + rng.IntN(3)}
				if f.point != sigterm {
					lo, hi := f.lo, f.hi
					if hi == 0 {
						hi = tr.rows / 10 / 2 // frames of 10 rows
					}
					switch {
					case mode == "nats" && f.point == faultpoint.OrchestratorAppended:
						// A NATS worker chains frames and reports a chain
						// in few messages, so the orchestrator appends
						// less than once per frame (one trial of 222 rows
						// ran on 14 commands).
						hi = max(lo, hi/2)
					case mode == "nats":
						lo, hi = max(1, lo/2), max(1, hi/2)
					}
					tr.after = lo + rng.IntN(hi-lo+1)
				}
				trials = append(trials, tr)
			}
		}
	}
	rng.Shuffle(len(trials), func(i, j int) { trials[i], trials[j] = trials[j], trials[i] })

	var dups []string
	var reissues []time.Duration
	for i, tr := range trials {
		t.Run(fmt.Sprintf("%02d-%s", i, tr), func(t *testing.T) {
			var o outcome
			if tr.mode == "inproc" {
				o = chaosInProcess(t, tr, cliBin)
			} else {
				o = chaosNATS(t, tr, serverBin, workerBin)
			}
			dups = append(dups, fmt.Sprintf("%s/%s:%d", tr.mode, tr.fault.point, o.duplicates))
			if o.reissue > 0 {
				reissues = append(reissues, o.reissue)
			}
		})
	}
	t.Logf("duplicate body runs per trial: %s", strings.Join(dups, " "))
	if len(reissues) > 0 {
		t.Logf("a killed worker's death to its frame's re-issue: %v", reissues)
	}
}

// chaosEnv is a trial's queue and the paths of its fault marker.
func chaosEnv(t *testing.T, tr trial) (*env, string) {
	t.Helper()
	return newEnv(t, tr.rows), filepath.Join(t.TempDir(), "fault.mark")
}

// faultEnv is the environment that arms tr's fault point.
func faultEnv(tr trial, mark string) []string {
	if tr.fault.point == sigterm {
		return nil
	}
	return []string{faultpoint.EnvPoint + "=" + tr.fault.point, faultpoint.EnvAfter + "=" + strconv.Itoa(tr.after), faultpoint.EnvMark + "=" + mark}
}

// checkFired fails the trial unless p died by SIGKILL at its fault point.
func checkFired(t *testing.T, tr trial, p *proc, mark string) {
	t.Helper()
	b, _ := os.ReadFile(mark)
	want := fmt.Sprintf("%s %d", tr.fault.point, p.cmd.Process.Pid)
	if !strings.Contains(string(b), want) || !p.killedBySIGKILL() {
		t.Fatalf("the fault did not fire in %s: marker %q (want %q), killed by SIGKILL %v", p.name, b, want, p.killedBySIGKILL())
	}
}

// waitDone polls until at least n rows are done (or the process ended).
func (e *env) waitDone(ctx context.Context, t *testing.T, n int, p *proc) {
	t.Helper()
	for {
		d, err := e.done(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d >= n || !p.alive() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d rows done before the deadline", d, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// verify checks the queue after the trial: every row done (its body ran
// at least once), none claimed; it returns the duplicate body runs.
func (e *env) verify(ctx context.Context, t *testing.T, rows int) int {
	t.Helper()
	var total, done, claimed, minRuns, runs int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'claimed'),
		coalesce(min(done_count), 0), coalesce(sum(done_count), 0) FROM `+e.table).Scan(&total, &done, &claimed, &minRuns, &runs); err != nil {
		t.Fatal(err)
	}
	if total != rows || done != rows || claimed != 0 || minRuns < 1 {
		t.Fatalf("rows %d, done %d, left claimed %d, fewest body runs of a row %d; want %d done, none claimed, every row run", total, done, claimed, minRuns, rows)
	}
	return runs - rows
}

// chaosInProcess runs the drain with cursorflow run, lets the fault kill
// it (or sends SIGTERM), then finishes it with cursorflow resume.
func chaosInProcess(t *testing.T, tr trial, cli string) outcome {
	e, mark := chaosEnv(t, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	book := filepath.Join(dir, "chaos.yaml")
	if err := os.WriteFile(book, []byte(fmt.Sprintf(chaosPlaybook, tr.maxInFlight)), 0o644); err != nil {
		t.Fatal(err)
	}
	logURL := "sqlite:" + filepath.Join(dir, "events.db")
	run := startEnv(t, "run", faultEnv(tr, mark), cli, "run", book, "--set", "table="+e.table,
		"--credential", "pg="+e.dsn, "--eventlog", logURL, "-v")
	if tr.fault.point == sigterm {
		e.waitDone(ctx, t, tr.rows/4, run)
		_ = run.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-run.done:
	case <-ctx.Done():
		t.Fatal("cursorflow run neither finished nor died")
	}
	if tr.fault.point == sigterm {
		if run.cmd.ProcessState.Success() {
			t.Fatal("the run finished before the SIGTERM: make the trial slower")
		}
	} else {
		checkFired(t, tr, run, mark)
	}
	log, err := sqlitelog.Open(ctx, strings.TrimPrefix(logURL, "sqlite:"), sqlitelog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := log.Executions(ctx, eventlog.ExecutionsQuery{})
	_ = log.Close()
	if err != nil || len(ids) != 1 {
		t.Fatalf("executions in the log: %v, %v; want one", ids, err)
	}
	resume := start(t, "resume", cli, "resume", ids[0], "--credential", "pg="+e.dsn, "--eventlog", logURL, "-v")
	select {
	case <-resume.done:
	case <-ctx.Done():
		t.Fatal("cursorflow resume did not finish")
	}
	if !resume.cmd.ProcessState.Success() {
		t.Fatalf("cursorflow resume exited %v", resume.cmd.ProcessState)
	}
	log, err = sqlitelog.Open(ctx, strings.TrimPrefix(logURL, "sqlite:"), sqlitelog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	evs, err := log.Read(ctx, ids[0], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := logtest.CountType(evs, eventlog.TypeLoopDone); n != 1 {
		t.Fatalf("loop.done recorded %d times", n)
	}
	if last := evs[len(evs)-1].Type; last != eventlog.TypeExecutionCompleted {
		t.Fatalf("the execution ended with %s", last)
	}
	o := outcome{duplicates: e.verify(ctx, t, tr.rows)}
	t.Logf("%s: %d duplicate body runs, %d events", tr, o.duplicates, len(evs))
	return o
}

// chaosNATS runs the drain on two server replicas and two workers over
// NATS; the fault is armed in the leader (orchestrator point) or in
// worker-1 (frame points), or worker-1 gets a SIGTERM.
func chaosNATS(t *testing.T, tr trial, serverBin, workerBin string) outcome {
	e, mark := chaosEnv(t, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	env := faultEnv(tr, mark)
	var leaderEnv, workerEnv []string
	if tr.fault.point == faultpoint.OrchestratorAppended {
		leaderEnv = env
	} else {
		workerEnv = env
	}
	fast := []string{"--lease", "2s", "--command-lease", "2s"}
	// The first replica takes the lease; the second stands by.
	a := e.serverEnv(t, serverBin, "server-a", leaderEnv, fast...)
	a.waitHealthy(ctx, t)
	if leaderOf(ctx, t, []*replica{a}) != a {
		t.Fatal("server-a does not lead")
	}
	b := e.serverEnv(t, serverBin, "server-b", nil, fast...)
	b.waitHealthy(ctx, t)
	replicas := []*replica{a, b}
	// A slot chains one frame at most on a worker before its next frame is
	// dispatched again, so frames go to both workers (and the victim meets
	// its fault) also in these short drains.
	workerFlags := []string{"--report-timeout", "3s", "--grace", "1s", "--max-chain", "1", "--capacity-every", "200ms"}
	w1 := e.workerEnv(t, workerBin, "worker-1", 4, workerEnv, workerFlags...)
	e.workerEnv(t, workerBin, "worker-2", 4, nil, workerFlags...)
	// Both workers pull before the drain starts.
	a.waitWorkers(ctx, t, 2)

	var started api.Started
	if _, err := a.do(ctx, http.MethodPost, "/v1/executions", api.StartRequest{
		Source: fmt.Sprintf(chaosPlaybook, tr.maxInFlight), File: "chaos.yaml", Workload: map[string]any{"table": e.table},
	}, &started); err != nil {
		t.Fatal(err)
	}
	id := started.ExecutionID
	victim := w1
	if tr.fault.point == faultpoint.OrchestratorAppended {
		victim = a.proc
	}
	if tr.fault.point == sigterm {
		e.waitDone(ctx, t, tr.rows/4, victim)
		_ = victim.cmd.Process.Signal(syscall.SIGTERM)
	}
	for {
		term, err := e.terminal(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if term != "" {
			if term != eventlog.TypeExecutionCompleted {
				t.Fatalf("execution ended %s", term)
			}
			break
		}
		select {
		case <-ctx.Done():
			n, _ := e.done(context.Background())
			t.Fatalf("the drain did not finish: %d of %d rows done", n, tr.rows)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if tr.fault.point == sigterm {
		select {
		case <-victim.done:
		case <-ctx.Done():
			t.Fatal("worker-1 did not stop after SIGTERM")
		}
	} else {
		checkFired(t, tr, victim, mark)
	}
	if tr.fault.point == faultpoint.OrchestratorAppended && leaderOf(ctx, t, replicas) != b {
		t.Fatal("server-b did not take over")
	}
	var loopDone int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+e.schema+`.events WHERE execution_id = $1 AND type = 'loop.done'`, id).Scan(&loopDone); err != nil {
		t.Fatal(err)
	}
	if loopDone != 1 {
		t.Fatalf("loop.done recorded %d times", loopDone)
	}
	o := outcome{duplicates: e.verify(ctx, t, tr.rows)}
	if tr.fault.point != sigterm && tr.fault.point != faultpoint.OrchestratorAppended {
		// The dead worker's frames come back as new attempts, fenced
		// against it; the first of them after its death is its re-issue.
		var first *time.Time
		if err := e.pool.QueryRow(ctx, `SELECT min(time) FROM `+e.schema+`.events WHERE execution_id = $1
			AND type = 'command.issued' AND attempt > 1 AND time >= $2`, id, victim.exited.Add(-100*time.Millisecond)).Scan(&first); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			t.Fatal("no frame was re-issued after the worker died")
		}
		o.reissue = first.Sub(victim.exited)
	}
	var st engine.Status
	if _, err := b.do(ctx, http.MethodGet, "/v1/executions/"+id, nil, &st); err != nil {
		t.Fatal(err)
	}
	ls := st.Loops["start#1"]
	if o.reissue > 0 {
		t.Logf("%s: %d duplicate body runs, re-issue %v after the worker's death, %d frames", tr, o.duplicates, o.reissue.Round(time.Millisecond), ls.Frames)
	} else {
		t.Logf("%s: %d duplicate body runs, %d frames", tr, o.duplicates, ls.Frames)
	}
	return o
}
