package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/clirun"
)

// TestKillAndResumeMidFanout runs a fan-out loop in a real `cursorflow
// run`, SIGKILLs it once some shards completed, and finishes it with
// `cursorflow resume`: every shard runs, none the log had completed runs
// again, the fan-in is recorded once and its arc sees every shard done.
func TestKillAndResumeMidFanout(t *testing.T) {
	bin := cliBinary(t)
	dir := t.TempDir()
	side := filepath.Join(dir, "side.txt")
	pb := filepath.Join(dir, "fanout.yaml")
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fanout-kill}
workload:
  side: ` + side + `
workflow:
  - step: start
    loop:
      in: '{{ range(12) | list }}'
      iterator: part
      spec: {loop_mode: fanout, shards: 6, max_in_flight: 2, max_shard_retries: 1}
    tool: {kind: shell, command: "sleep 0.3; echo shard-{{ shard.index }}:{{ iter.part | join('-') }} >> {{ side }}"}
    next:
      - step: end
        when: '{{ event.name == "loop.fanin.completed" }}'
        args: {done: '{{ fanin.done }}', failed: '{{ fanin.failed }}'}
  - step: end
    tool: {kind: shell, command: "echo end done={{ done }} failed={{ failed }} >> {{ side }}"}
`
	if err := os.WriteFile(pb, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "events.db")
	store := "file://" + filepath.Join(dir, "results")
	run := exec.Command(bin, "run", pb, "--eventlog", "sqlite:"+logPath, "--result-store", store)
	id, _ := startRun(t, run)
	// Kill once two shards are done on record (four are still to come).
	killWhenRecorded(t, run, logPath, id, func(evs []eventlog.Event) bool {
		return len(completedBases(evs, "start", "/shard")) >= 2
	}, 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	before := completedBases(clirun.Recorded(t, ctx, logPath, id), "start", "/shard")
	if len(before) == 0 || len(before) == 6 {
		t.Fatalf("the killed run recorded %d completed shards; want some, not all", len(before))
	}
	out, err := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", "sqlite:"+logPath, "--result-store", store, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"status":"completed"`) {
		t.Fatalf("resume output: %s", out)
	}
	b, _ := os.ReadFile(side)
	counts := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		key, _, _ := strings.Cut(l, ":")
		counts[key]++
	}
	for i := range 6 {
		if counts["shard-"+string(rune('0'+i))] < 1 {
			t.Fatalf("shard %d never ran\n%s", i, b)
		}
	}
	for _, shard := range before {
		if counts["shard-"+shard] != 1 {
			t.Fatalf("shard %s completed before the kill but ran %d times\n%s", shard, counts["shard-"+shard], b)
		}
	}
	if !strings.Contains(string(b), "end done=6 failed=0") || strings.Count(string(b), "end ") != 1 {
		t.Fatalf("the fan-in arc: %s", b)
	}
	evs := clirun.Recorded(t, ctx, logPath, id)
	fanins := 0
	for _, ev := range evs {
		if ev.Type == eventlog.TypeLoopFaninCompleted {
			fanins++
		}
	}
	if fanins != 1 {
		t.Fatalf("%d loop.fanin.completed recorded", fanins)
	}
	t.Logf("killed after %d of 6 shards; resumed to the fan-in", len(before))
}
