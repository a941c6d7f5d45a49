package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cursorflow/cursorflow/internal/faultpoint"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestLostLeasedClaimIsNotStranded: a run dies between a leased source's
// claim and its record (the claim holds entries under the source's own
// lease, which outlives the process). The resumed execution must not take
// the empty claims that follow for a drained source while those leases
// last: it completes only once every entry ran, and leaves nothing
// pending in the consumer group.
func TestLostLeasedClaimIsNotStranded(t *testing.T) {
	t.Parallel()
	url := testenv.Redis(t)
	_, _, cli := faultBinaries(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	stream := fmt.Sprintf("e2e:lost-claim:%d", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(context.Background(), stream, stream+":dead") })
	const entries = 60
	for i := 1; i <= entries; i++ {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"n": i}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	side, pb := filepath.Join(dir, "side.txt"), filepath.Join(dir, "drain.yaml")
	if err := os.WriteFile(pb, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: lost-claim}
workflow:
  - step: start
    loop:
      cursor:
        kind: redisstream
        auth: q
        stream: `+stream+`
        group: drain
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 2
        frame: {max_rows: 10, process: row, lease_seconds: 2}
    tool: {kind: shell, command: "echo n-{{ iter.job.n }}. >> `+side+`"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	logURL := "sqlite:" + filepath.Join(dir, "events.db")
	cred := "q=" + url
	// The third claim's entries are held by the consumer group when the
	// process dies, before the engine recorded them.
	run := startEnv(t, "run", []string{faultpoint.EnvPoint + "=" + faultpoint.FrameClaimed, faultpoint.EnvAfter + "=3"},
		cli, "run", pb, "--eventlog", logURL, "--credential", cred)
	<-run.done
	if !run.killedBySIGKILL() {
		t.Fatal("the run was not killed at its third claim")
	}
	b, _ := os.ReadFile(run.out.Name())
	id := ""
	for _, f := range strings.Fields(string(b)) {
		if len(f) == 36 && strings.Count(f, "-") == 4 {
			id = f
			break
		}
	}
	if id == "" {
		t.Fatalf("no execution id in the run's output:\n%s", b)
	}
	out, err := exec.CommandContext(ctx, cli, "resume", id, "--eventlog", logURL, "--credential", cred, "--json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"status":"completed"`) {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	ran, _ := os.ReadFile(side)
	var missing []int
	for i := 1; i <= entries; i++ {
		if !strings.Contains(string(ran), fmt.Sprintf("n-%d.", i)) {
			missing = append(missing, i)
		}
	}
	pending, err := rdb.XPending(ctx, stream, "drain").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 || pending.Count != 0 {
		t.Fatalf("the resumed execution completed with entries %v never run and %d pending in the group", missing, pending.Count)
	}
}
