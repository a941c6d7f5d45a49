package sqlite_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/leakcheck"
)

// claimerEnv, when set, makes the test binary a claimer process instead
// of running the tests: it claims, prints the keys, and waits to be
// killed (see harness.ClaimAndDie).
const claimerEnv = "CURSORFLOW_SQLITE_TEST_CLAIMER"

type claimerJob struct {
	Path  string `json:"path"`
	Table string `json:"table"`
	Max   int    `json:"max"`
}

// The package starts goroutines: every test must leave none behind.
func TestMain(m *testing.M) {
	if job := os.Getenv(claimerEnv); job != "" {
		os.Exit(claimAndWait(job))
	}
	leakcheck.VerifyTestMain(m, nil)
}

// claimAndWait claims up to job.Max rows, prints "claimed KEY,KEY..." and
// blocks with the claim pending until the process is killed.
func claimAndWait(job string) int {
	var j claimerJob
	if err := json.Unmarshal([]byte(job), &j); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	tmpl, err := dsl.CompileTemplate(claimSQL, dsl.Pos{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	drv := sqlite.New(sqlite.Config{})
	ctx := context.Background()
	cur, err := drv.Open(ctx, cursor.Spec{Kind: "sqlite", Credential: "sqlite:" + j.Path, Claim: tmpl,
		Scope: map[string]any{"workload": map[string]any{"table": j.Table}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := cur.Claim(ctx, j.Max)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	keys := make([]string, len(c.Rows))
	for i, r := range c.Rows {
		keys[i] = r.Key
	}
	fmt.Printf("claimed %s\n", strings.Join(keys, ","))
	select {}
}

// ClaimAndDie runs the claim in a process of its own and SIGKILLs it
// while the claim is pending: SQLite's lock dies with the process and the
// uncommitted claim is never seen.
func (h *harness) ClaimAndDie(t *testing.T, spec cursor.Spec, max int) []string {
	t.Helper()
	job, _ := json.Marshal(claimerJob{Path: h.path, Table: drivertest.TableOf(spec), Max: max})
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), claimerEnv+"="+string(job))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	keys, ok := strings.CutPrefix(strings.TrimSpace(line), "claimed ")
	if err != nil || !ok {
		t.Fatalf("the claimer process did not claim: %q, %v; stderr: %s", line, err, stderr.String())
	}
	if keys == "" {
		return nil
	}
	return strings.Split(keys, ",")
}
