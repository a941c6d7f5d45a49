package e2e_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/internal/faultpoint"
)

// TestStalledClaimerDoesNotStrandRows: a worker is paused (SIGSTOP: a
// frozen VM, a long GC or debugger stop) right after its claim, before
// the claim is on record. Its process is alive, so its connection and the
// claim's transaction stay open and keep the rows locked; the claims of
// the other worker skip them. The frame is re-issued once its heartbeats
// stop, and the drain must not end without those rows: the execution
// completes only with every row done, none left pending or claimed.
//
// The claim is a frame's own (its body hands on partial results, so the
// slot does not chain) or the one a worker makes ahead for the slot's
// next frame while it reports the last one (chained: its frame is
// re-issued with recorded rows, and the re-issue chains on).
func TestStalledClaimerDoesNotStrandRows(t *testing.T) {
	for _, tc := range []struct{ name, source string }{
		{"own claim", playbook(2)},
		{"chained claim", strings.Replace(playbook(2), "SELECT pg_sleep({{ sleep }});", "DO $$ BEGIN PERFORM pg_sleep({{ sleep }}); END $$;", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stalledClaimer(t, tc.source)
		})
	}
}

func stalledClaimer(t *testing.T, source string) {
	const rows = 1000
	e := newEnv(t, rows)
	serverBin, workerBin, _ := faultBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	srv := leaderOf(ctx, t, []*replica{e.server(t, serverBin, "server")})

	mark := filepath.Join(t.TempDir(), "mark")
	stalled := e.workerEnv(t, workerBin, "stalled", 1, []string{
		faultpoint.EnvPoint + "=" + faultpoint.FrameClaimed, faultpoint.EnvAfter + "=2",
		faultpoint.EnvAction + "=" + faultpoint.ActionStop, faultpoint.EnvMark + "=" + mark,
	})
	// Woken at the end, so that it stops like the others.
	t.Cleanup(func() { _ = stalled.cmd.Process.Signal(syscall.SIGCONT) })

	var started api.Started
	if _, err := srv.do(ctx, http.MethodPost, "/v1/executions", api.StartRequest{
		Source: source, File: "drain.yaml", Workload: map[string]any{"table": e.table, "sleep": 0.1},
	}, &started); err != nil {
		t.Fatal(err)
	}
	for {
		if b, _ := os.ReadFile(mark); strings.Contains(string(b), faultpoint.FrameClaimed) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the worker never reached its second claim")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The stalled worker holds its second claim, unrecorded; another one
	// drains the rest.
	e.worker(t, workerBin, "worker", 2)

	for !e.ended(ctx, t, started.ExecutionID) {
		select {
		case <-ctx.Done():
			n, _ := e.done(ctx)
			t.Fatalf("the drain did not finish: %d of %d rows done", n, rows)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Still stalled: nothing it does after waking can rescue the rows.
	var done, pending, claimed int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'pending'),"+
		" count(*) FILTER (WHERE status = 'claimed') FROM "+e.table).Scan(&done, &pending, &claimed); err != nil {
		t.Fatal(err)
	}
	if done != rows {
		t.Fatalf("the execution completed with %d of %d rows done, %d pending, %d claimed: the stalled claim's rows were left behind",
			done, rows, pending, claimed)
	}
}
