package redisstream_test

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cursorflow/cursorflow/drivers/internal/deadtest"
	"github.com/cursorflow/cursorflow/drivers/redisstream"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/tools"
)

const playbookFile = "../../examples/playbooks/redisstream_drain.yaml"

// TestPlaybookDrains runs examples/playbooks/redisstream_drain.yaml
// through the engine against a 10,000-entry stream with 4 frame slots and
// checks that every entry was processed and acknowledged exactly once.
func TestPlaybookDrains(t *testing.T) {
	const n = 10000
	rdb, base := admin(t)
	stream := newStream(t, rdb, "e2e_")
	group := "drain"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := fill(t, rdb, stream, n)

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: playbookFile,
		Kind:         "redisstream",
		Driver:       redisstream.New(redisstream.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"redis_queue": base}),
		Workload:     map[string]any{"stream": stream, "group": group},
	})

	// The source: the group read every entry and nothing is pending.
	pending, err := rdb.XPending(ctx, stream, group).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pending.Count != 0 {
		t.Fatalf("%d entries still pending", pending.Count)
	}
	groups, err := rdb.XInfoGroups(ctx, stream).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Name != group || groups[0].EntriesRead != n || groups[0].Lag != 0 {
		t.Fatalf("groups %+v, want %q with %d entries read and lag 0", groups, group, n)
	}
	if dead, err := rdb.XLen(ctx, stream+":dead").Result(); err != nil || dead != 0 {
		t.Fatalf("dead-letter stream holds %d entries (err %v), want 0", dead, err)
	}
	// The engine: every entry ran through the body once, successfully.
	drivertest.ExpectEachOnceOK(t, r.Events, ids)
	if ls := r.Loop; ls.OK != n || !ls.Finished {
		t.Fatalf("loop status %+v, want %d rows ok and finished", ls, n)
	}
	r.LogRate(t, n, "entries")
}

// TestPlaybookCountsDeadEntries drains entries whose body fails for every
// 50th (deadtest.Drain): each of those fails max_attempts times and is
// then listed dead by the claim of its next delivery, and dead-lettered
// when that claim commits, which the loop must count as dead, one row
// each, beside the stream's dead letter.
func TestPlaybookCountsDeadEntries(t *testing.T) {
	rdb, base := admin(t)
	stream := newStream(t, rdb, "e2e_dead_")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := fill(t, rdb, stream, deadtest.Rows)
	deadtest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/dead_drain.yaml",
		Kind:         "redisstream",
		Driver:       redisstream.New(redisstream.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"redis_queue": base}),
		Workload:     map[string]any{"stream": stream},
	}, ids, func() []string {
		msgs, err := rdb.XRange(ctx, stream+":dead", "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		var dead []string
		for _, m := range msgs {
			dead = append(dead, m.Values["cursorflow_id"].(string))
		}
		return dead
	})
}

// TestPlaybookDefaultGroupPerExecution drains a stream twice with a
// playbook that names no group: each execution's loop gets a group of its
// own and reads the whole stream, rather than continue the group of an
// earlier execution whose loop had the same run id (start#1).
func TestPlaybookDefaultGroupPerExecution(t *testing.T) {
	const n = 25
	rdb, base := admin(t)
	stream := newStream(t, rdb, "e2e_default_group_")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := fill(t, rdb, stream, n)

	for run := 1; run <= 2; run++ {
		r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
			PlaybookFile: "testdata/default_group_drain.yaml",
			Kind:         "redisstream",
			Driver:       redisstream.New(redisstream.Config{}),
			Keychain:     tools.StaticURLs(map[string]string{"redis_queue": base}),
			Workload:     map[string]any{"stream": stream},
			Shutdown:     true,
		})
		drivertest.ExpectEachOnceOK(t, r.Events, ids)
		if ls := r.Loop; ls.OK != n || !ls.Finished {
			t.Fatalf("run %d: loop status %+v, want %d rows ok and finished", run, ls, n)
		}
		// Each execution's group is gone once its loop is done: a stream
		// drained by every execution does not collect a group per run.
		if groups := groupNames(t, rdb, stream); len(groups) != 0 {
			t.Fatalf("run %d: groups %v left behind, want none", run, groups)
		}
	}
}

// TestPlaybookFinish drains a stream through a group the driver names and
// then through one the playbook names: once the execution completed, the
// first is destroyed (cursor.Finisher) and the second, which other
// executions may share, is left as it is.
func TestPlaybookFinish(t *testing.T) {
	const n = 25
	rdb, base := admin(t)
	stream := newStream(t, rdb, "e2e_finish_")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fill(t, rdb, stream, n)

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/finish_drain.yaml",
		Kind:         "redisstream",
		Driver:       redisstream.New(redisstream.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"redis_queue": base}),
		Workload:     map[string]any{"stream": stream, "group": "named"},
		Shutdown:     true,
	})
	for _, run := range []string{"start#1", "named#1"} {
		if ls := r.Status.Loops[run]; ls.OK != n || !ls.Finished {
			t.Fatalf("loop %s: status %+v, want %d rows ok and finished", run, ls, n)
		}
	}
	if groups := groupNames(t, rdb, stream); !reflect.DeepEqual(groups, []string{"named"}) {
		t.Fatalf("groups %v, want [named]: the driver's own group destroyed, the playbook's kept", groups)
	}
}

// TestPlaybookFinishAfterCancel cancels an execution in the middle of a
// loop whose group the driver names: a cancelled execution is never
// resumed, so its loop's group goes although the loop never got to
// loop.done.
func TestPlaybookFinishAfterCancel(t *testing.T) {
	rdb, base := admin(t)
	stream := newStream(t, rdb, "e2e_cancel_")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fill(t, rdb, stream, 20)

	r := drivertest.Cancelled(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/interrupted_drain.yaml",
		Kind:         "redisstream",
		Driver:       redisstream.New(redisstream.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"redis_queue": base}),
		Workload:     map[string]any{"stream": stream},
		Shutdown:     true,
	})
	if r.Summary.Status != engine.StatusCancelled {
		t.Fatalf("execution %s, want cancelled", r.Summary.Status)
	}
	if groups := groupNames(t, rdb, stream); len(groups) != 0 {
		t.Fatalf("groups %v left behind by the cancelled execution, want none", groups)
	}
}

// TestPlaybookFinishAfterResume closes the engine in the middle of a loop
// whose group the driver names: the group must still be there, with the
// claimed entries, for the engine that resumes the execution, and gone
// once that one has finished the loop.
func TestPlaybookFinishAfterResume(t *testing.T) {
	const n = 20
	rdb, base := admin(t)
	stream := newStream(t, rdb, "e2e_resume_")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := fill(t, rdb, stream, n)

	r := drivertest.Interrupted(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/interrupted_drain.yaml",
		Kind:         "redisstream",
		Driver:       redisstream.New(redisstream.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"redis_queue": base}),
		Workload:     map[string]any{"stream": stream},
		Shutdown:     true,
	}, func() {
		groups, err := rdb.XInfoGroups(ctx, stream).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) != 1 || !strings.HasPrefix(groups[0].Name, "cursorflow:") || groups[0].EntriesRead == 0 {
			t.Fatalf("after the interruption: groups %+v, want the loop's own, having read entries", groups)
		}
	})
	if r.Summary.Status != engine.StatusCompleted {
		t.Fatalf("resumed execution %s: %s %s", r.Summary.Status, r.Summary.Field, r.Summary.Error)
	}
	expectEachOK(t, r, ids)
	if groups := groupNames(t, rdb, stream); len(groups) != 0 {
		t.Fatalf("groups %v left behind by the resumed execution, want none", groups)
	}
}

// expectEachOK fails the test unless every key ran through the body
// successfully at least once (a body cut short by a close runs again).
func expectEachOK(t *testing.T, r drivertest.Result, keys []string) {
	t.Helper()
	items := drivertest.FrameItems(t, r.Events)
	for _, k := range keys {
		if !slices.Contains(items[k], engine.OutcomeOK) {
			t.Fatalf("key %s: outcomes %v, want one ok", k, items[k])
		}
	}
}

// groupNames returns the names of stream's consumer groups, sorted.
func groupNames(t *testing.T, rdb *redis.Client, stream string) []string {
	t.Helper()
	groups, err := rdb.XInfoGroups(context.Background(), stream).Result()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, g := range groups {
		names = append(names, g.Name)
	}
	slices.Sort(names)
	return names
}

// TestPlaybookBinaryFields drains entries whose bin field holds bytes that
// are not valid UTF-8: the body must be given them in base64, as the SQL
// drivers give binary columns, and the claim must record the same value,
// so that a frame re-issued from the log runs on what the first run saw
// (raw bytes reached the body, which sql_literal refused, and were
// recorded with U+FFFD in their place). Valid UTF-8 stays as it is.
func TestPlaybookBinaryFields(t *testing.T) {
	rdb, base := admin(t)
	stream := newStream(t, rdb, "e2e_binary_")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []string
	for i, bin := range []string{"bin\xff\xfeok\x80", "\xc3\x28", "plain"} {
		text := "café ☃ " + strconv.Itoa(i+1)
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"bin", bin, "text", text}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}

	var bodies drivertest.Bodies
	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/binary_drain.yaml",
		Kind:         "redisstream",
		Driver:       redisstream.New(redisstream.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"redis_queue": base}),
		Workload:     map[string]any{"stream": stream},
		Tools:        map[string]tools.Tool{"body": bodies.Tool()},
	})
	drivertest.ExpectEachOnceOK(t, r.Events, ids)

	// Sorted as drivertest sorts them.
	wantBin := []any{"Ymlu//5va4A=", "plain", "wyg="}
	if got := bodies.Values("bin"); !reflect.DeepEqual(got, wantBin) {
		t.Errorf("the body was given bin %q, want %q", got, wantBin)
	}
	if got := drivertest.ClaimedValues(t, r.Events, "bin"); !reflect.DeepEqual(got, wantBin) {
		t.Errorf("frame.claimed recorded bin %q, want %q", got, wantBin)
	}
	wantLiteral := []any{"'Ymlu//5va4A='", "'plain'", "'wyg='"}
	if got := bodies.Values("bin_literal"); !reflect.DeepEqual(got, wantLiteral) {
		t.Errorf("the body quoted bin as %q, want %q", got, wantLiteral)
	}
	wantText := []any{"café ☃ 1", "café ☃ 2", "café ☃ 3"}
	if got := bodies.Values("text"); !reflect.DeepEqual(got, wantText) {
		t.Errorf("the body was given text %q, want %q", got, wantText)
	}
}
