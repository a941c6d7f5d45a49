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
	resumeKilled(ctx, t, cli, run, logURL, cred)
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

// TestBuriedEntryOfAKilledClaimReachesTheDeadLetter: a run dies between
// the record of a claim that lists an entry dead (past max_attempts) and
// that claim's commit, which would have moved it to the dead-letter
// stream. The entry stays pending under the dead claimer, within its
// lease. The resumed execution reports it dead (the re-issued frame) and
// must not end the loop before a later claim takes it back and moves it:
// with the loop's own consumer group, destroyed once the loop is over, no
// later run would, and the log would report dead an entry that no
// dead-letter stream holds.
func TestBuriedEntryOfAKilledClaimReachesTheDeadLetter(t *testing.T) {
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
	stream := fmt.Sprintf("e2e:buried-kill:%d", time.Now().UnixNano())
	t.Cleanup(func() { rdb.Del(context.Background(), stream, stream+":dead") })
	// Entry 1 always fails; the others succeed.
	const entries = 6
	var badID string
	for i := 1; i <= entries; i++ {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"n": i, "bad": i == 1}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			badID = id
		}
	}
	dir := t.TempDir()
	pb := filepath.Join(dir, "drain.yaml")
	// One frame at a time, one entry a claim, no group named (the loop's
	// own). Claims 1 and 2 deliver entry 1, which fails and goes back;
	// claim 3 takes it back a third time, past max_attempts, lists it
	// dead, and reads entry 2 to run: the process dies once that claim
	// is on record, before it commits.
	if err := os.WriteFile(pb, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: buried-kill}
workflow:
  - step: start
    loop:
      cursor:
        kind: redisstream
        auth: q
        stream: `+stream+`
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 1
        frame: {max_rows: 1, process: row, lease_seconds: 10, max_attempts: 2}
    tool:
      kind: shell
      command: ["{{ 'false' if iter.job.bad == '1' else 'true' }}"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	logURL := "sqlite:" + filepath.Join(dir, "events.db")
	cred := "q=" + url
	run := startEnv(t, "run", []string{faultpoint.EnvPoint + "=" + faultpoint.FrameRecorded, faultpoint.EnvAfter + "=3"},
		cli, "run", pb, "--eventlog", logURL, "--credential", cred)
	<-run.done
	if !run.killedBySIGKILL() {
		t.Fatal("the run was not killed at its third claim's record")
	}
	out := resumeKilled(ctx, t, cli, run, logURL, cred)
	if !strings.Contains(string(out), `"dead":1`) && !strings.Contains(string(out), `"dead":2`) {
		t.Fatalf("the log does not report entry 1 dead:\n%s", out)
	}
	dead, err := rdb.XRange(ctx, stream+":dead", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var moved []string
	for _, m := range dead {
		moved = append(moved, fmt.Sprint(m.Values["cursorflow_id"]))
	}
	if len(moved) != 1 || moved[0] != badID {
		t.Fatalf("the log reports entry %s dead; the dead-letter stream holds %v\n%s", badID, moved, out)
	}
}

// TestLastDrainedClaimsDeadEntryReachesTheDeadLetter: a loop's last
// claim finds nothing new but an entry past max_attempts (it failed
// twice and went back), lists it dead, and commits, moving it to the
// dead-letter stream, once its frame.done is on record. That record ends
// the loop, whose Finish destroys the loop's own consumer group: the
// commit must come first, or the entry the log reports dead never
// reaches the dead-letter stream. Nothing is killed here; the two race in
// every such drain, so the test drains several streams.
func TestLastDrainedClaimsDeadEntryReachesTheDeadLetter(t *testing.T) {
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
	dir := t.TempDir()
	pb := filepath.Join(dir, "drain.yaml")
	if err := os.WriteFile(pb, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: last-dead}
workload: {stream: s}
workflow:
  - step: start
    loop:
      cursor: {kind: redisstream, auth: q, stream: "{{ workload.stream }}"}
      iterator: job
      spec:
        mode: cursor
        max_in_flight: 1
        frame: {max_rows: 10, process: row, lease_seconds: 10, max_attempts: 2}
    tool:
      kind: shell
      command: ["{{ 'false' if iter.job.bad == '1' else 'true' }}"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		stream := fmt.Sprintf("e2e:last-dead:%d:%d", time.Now().UnixNano(), i)
		t.Cleanup(func() { rdb.Del(context.Background(), stream, stream+":dead") })
		badID, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"n": 1, "bad": true}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"n": 2, "bad": false}}).Err(); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, cli, "run", pb, "--set", "stream="+stream, "--eventlog", "sqlite:"+filepath.Join(dir, fmt.Sprintf("events%d.db", i)),
			"--credential", "q="+url, "--json").CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"dead":1`) {
			t.Fatalf("drain %d: %v: the log does not report entry %s dead once:\n%s", i, err, badID, out)
		}
		dead, err := rdb.XRange(ctx, stream+":dead", "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) != 1 || dead[0].Values["cursorflow_id"] != badID {
			t.Fatalf("drain %d: the log reports entry %s dead; the dead-letter stream holds %v\n%s", i, badID, dead, out)
		}
	}
}

// resumeKilled resumes the execution whose id the killed run printed and
// returns the resume's JSON summary, once it completed.
func resumeKilled(ctx context.Context, t *testing.T, cli string, run *proc, logURL, cred string) []byte {
	t.Helper()
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
	return out
}
