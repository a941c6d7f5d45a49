package pftflow

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/internal/pftapi"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// flowFile is NoETL's playbook, used as it is in the shared corpus.
func flowFile(t testing.TB) string {
	t.Helper()
	return filepath.Join(testenv.SharedDir(t), "noetl-playbooks", "pft_flow_test", "test_pft_flow_v2.yaml")
}

type flowRun struct {
	api       *pftapi.Server
	apiURL    string
	dsn       string
	eventlog  string
	facility  int
	patients  int
	rateLimit int
}

func newRun(t testing.TB, facilities, patients int, cfg pftapi.Config) *flowRun {
	t.Helper()
	api := pftapi.New(cfg)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	rate := cfg.RateLimit
	if rate == 0 {
		rate = pftapi.DefaultRateLimit
	}
	return &flowRun{api: api, apiURL: srv.URL, dsn: testenv.PostgresDatabase(t, "cursorflow_pft"), eventlog: "sqlite:" + filepath.Join(t.TempDir(), "events.db"),
		facility: facilities, patients: patients, rateLimit: rate}
}

func (r *flowRun) runArgs() []string {
	return []string{"--set", "api_url=" + r.apiURL, "--set", fmt.Sprintf("num_facilities=%d", r.facility),
		"--set", fmt.Sprintf("patients_per_facility=%d", r.patients), "--credential", "pg_k8s=" + r.dsn,
		"--eventlog", r.eventlog, "--json"}
}

// verify checks the result tables: every patient of every facility for
// every data type, and every MDS detail the assessments name.
func (r *flowRun) verify(t testing.TB, executionID string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range []string{"assessments", "conditions", "medications", "vital_signs", "demographics"} {
		var facilities, minPatients, maxPatients int
		q := fmt.Sprintf(`SELECT count(*), coalesce(min(n), 0), coalesce(max(n), 0) FROM (
			SELECT facility_mapping_id, count(DISTINCT pcc_patient_id) AS n FROM public.pft_test_patient_%s GROUP BY 1) f`, table)
		if err := conn.QueryRow(ctx, q).Scan(&facilities, &minPatients, &maxPatients); err != nil {
			t.Fatal(err)
		}
		if facilities != r.facility || minPatients != r.patients || maxPatients != r.patients {
			t.Errorf("%s: %d facilities with %d..%d patients, want %d with %d each", table, facilities, minPatients, maxPatients, r.facility, r.patients)
		}
	}
	var expected, fetched, missing int
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM public.pft_test_mds_assessment_ids_work),
		(SELECT count(*) FROM public.pft_test_mds_assessment_details),
		(SELECT count(*) FROM public.pft_test_mds_assessment_ids_work w
		  WHERE NOT EXISTS (SELECT 1 FROM public.pft_test_mds_assessment_details d WHERE d.assessment_id = w.assessment_id))`).Scan(&expected, &fetched, &missing)
	if err != nil {
		t.Fatal(err)
	}
	// Every assessment page names its MDS ids: count them from the saved
	// payloads independently of the flow's own work table.
	var named int
	err = conn.QueryRow(ctx, `SELECT count(DISTINCT id) FROM public.pft_test_patient_assessments a,
		LATERAL jsonb_array_elements(a.payload->'data') rec, LATERAL jsonb_array_elements_text(rec->'mdsAssessmentIds') id`).Scan(&named)
	if err != nil {
		t.Fatal(err)
	}
	if expected == 0 || fetched != expected || missing != 0 || named != expected {
		t.Errorf("MDS details: %d named in assessments, %d queued, %d fetched, %d missing", named, expected, fetched, missing)
	}
	var logged int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM public.pft_test_validation_log WHERE execution_id = $1 AND assessments_done = total_expected`, executionID).Scan(&logged); err != nil {
		t.Fatal(err)
	}
	if logged != r.facility {
		t.Errorf("validation log holds %d passing facilities for execution %s, want %d", logged, executionID, r.facility)
	}
	var queueLeft int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM public.pft_test_patient_work_queue WHERE status <> 'done'`).Scan(&queueLeft); err != nil {
		t.Fatal(err)
	}
	if queueLeft != 0 {
		t.Errorf("%d patient work-queue rows are not done", queueLeft)
	}
}

func TestPFTFlowV2(t *testing.T) {
	bin := testenv.CLI(t)
	r := newRun(t, 2, 25, pftapi.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"run", flowFile(t)}, r.runArgs()...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cursorflow run: %v\n%s", err, out)
	}
	s := testenv.ParseSummary(t, out)
	if s.Status != "completed" || s.Steps["check_results"] != "completed" {
		t.Fatalf("execution %s: %s (check_results %s): %s at %s", s.ExecutionID, s.Status, s.Steps["check_results"], s.Error, s.FailedStep)
	}
	r.verify(t, s.ExecutionID)
	st := r.api.Stats()
	var answered int64
	for _, n := range st.Answered {
		answered += n
	}
	bound := float64(answered) / float64(r.rateLimit)
	t.Logf("2 x 25: %.1fs wall, bound %.1fs (%d requests / %d per s), %.2fx; %d events, %.2f per patient; %d throttled",
		s.Seconds, bound, answered, r.rateLimit, s.Seconds/bound, s.Events, float64(s.Events)/50, st.RateLimited)
}

var pftSeed = flag.Uint64("pft.seed", 0, "seed of TestPFTFlowV2UnderFaults's injected failures and kill moments (0: from the clock; the test logs it)")

// TestPFTFlowV2UnderFaults injects 5% HTTP 500s, keeps the throttle, and
// kills the CLI twice at random moments before resuming it to the end. A
// run that ends before both kills tested nothing and fails; the seed it
// logs (-pft.seed) replays its faults.
func TestPFTFlowV2UnderFaults(t *testing.T) {
	bin := testenv.CLI(t)
	seed := *pftSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -pft.seed %d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	r := newRun(t, 2, 25, pftapi.Config{FailureRate: 0.05, Seed: int64(seed)})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	start := exec.CommandContext(ctx, bin, append([]string{"run", flowFile(t)}, r.runArgs()...)...)
	id, wait := startAndReadID(t, start)
	for killed := 1; killed <= 2; killed++ {
		// Early in each run (the flow takes several seconds at the API's
		// rate limit), so that the kill lands while it works.
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		if err := start.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if out := wait(); strings.Contains(string(out), `"status":"completed"`) {
			t.Fatalf("the run completed before kill %d: the fault test tested nothing (seed %d)", killed, seed)
		}
		t.Logf("killed the CLI (%d) while execution %s was running", killed, id)
		start = exec.CommandContext(ctx, bin, "resume", id, "--credential", "pg_k8s="+r.dsn, "--eventlog", r.eventlog, "--json")
		_, wait = startAndReadID(t, start)
	}
	s := testenv.ParseSummary(t, wait())
	if s.Status != "completed" || s.Steps["check_results"] != "completed" {
		t.Fatalf("execution %s: %s: %s at %s (seed %d)", s.ExecutionID, s.Status, s.Error, s.FailedStep, seed)
	}
	if s.ExecutionID != id {
		t.Fatalf("resumed execution %s, started %s", s.ExecutionID, id)
	}
	r.verify(t, id)
	st := r.api.Stats()
	t.Logf("faults: %d injected 500s, %d throttled, 2 kills; %d events", st.Injected, st.RateLimited, s.Events)
	if st.Injected == 0 {
		t.Fatalf("no failure was injected: the fault variant tested nothing (seed %d)", seed)
	}
}

// startAndReadID starts cmd (with --json, which prints the execution id
// on stderr and the summary on stdout), reads the id, and returns a
// function that waits for the process and returns its output, stdout then
// stderr.
func startAndReadID(t *testing.T, cmd *exec.Cmd) (string, func() []byte) {
	t.Helper()
	var stdout strings.Builder
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	rd := bufio.NewReader(errPipe)
	id := ""
	for id == "" {
		line, err := rd.ReadString('\n')
		stderr.WriteString(line)
		if rest, ok := strings.CutPrefix(line, "execution "); ok {
			id = strings.TrimSpace(rest)
		}
		if err != nil && id == "" {
			_ = cmd.Wait()
			t.Fatalf("reading execution id: %v\n%s%s", err, stdout.String(), stderr.String())
		}
	}
	return id, func() []byte {
		// The process is exiting: a read error only ends its output.
		rest, _ := io.ReadAll(rd)
		_ = cmd.Wait()
		stderr.Write(rest)
		return []byte(stdout.String() + stderr.String())
	}
}
