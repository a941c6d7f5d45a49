package redisstream_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/redisstream"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/builtin"
)

const playbookFile = "../../examples/playbooks/redisstream_drain.yaml"

// frameItems returns every row key the engine reported in frame.done
// events, with its outcomes.
func frameItems(t testing.TB, evs []eventlog.Event) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, ev := range evs {
		if ev.Type != eventlog.TypeFrameDone {
			continue
		}
		var p struct {
			Items []struct {
				Key     string `json:"key"`
				Outcome string `json:"outcome"`
			} `json:"items"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatalf("frame.done payload: %v", err)
		}
		for _, it := range p.Items {
			out[it.Key] = append(out[it.Key], it.Outcome)
		}
	}
	return out
}

// TestPlaybookDrains runs examples/playbooks/redisstream_drain.yaml
// through the engine against a 10,000-entry stream with 4 frame slots and
// checks that every entry was processed and acknowledged exactly once.
func TestPlaybookDrains(t *testing.T) {
	const n = 10000
	src, err := os.ReadFile(playbookFile)
	if err != nil {
		t.Fatal(err)
	}
	rdb, base := admin(t)
	stream := "e2e_" + randSuffix(t) + ":jobs"
	group := "drain"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = rdb.Del(context.Background(), stream, stream+":dead").Err() })
	ids := fill(t, rdb, stream, n)

	kc := tools.StaticURLs(map[string]string{"redis_queue": base})
	treg, tclose := builtin.NewRegistry(builtin.Options{Keychain: kc})
	t.Cleanup(func() { _ = tclose.Close() })
	creg := cursor.NewRegistry()
	if err := creg.Register("redisstream", redisstream.New(redisstream.Config{})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = creg.Close() })
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })

	began := time.Now()
	id, err := e.Start(ctx, src, engine.StartOptions{File: playbookFile, Workload: map[string]any{"stream": stream, "group": group}})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(began)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("execution %s: %s %s %s", sum.Status, sum.Step, sum.Field, sum.Error)
	}
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}

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
	items := frameItems(t, evs)
	if len(items) != n {
		t.Fatalf("the engine reported %d distinct keys, want %d", len(items), n)
	}
	for _, k := range ids {
		if got := items[k]; len(got) != 1 || got[0] != engine.OutcomeOK {
			t.Fatalf("entry %s: outcomes %v, want [ok]", k, got)
		}
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	ls := st.Loops["start#1"]
	if ls.OK != n || !ls.Finished {
		t.Fatalf("loop status %+v, want %d rows ok and finished", ls, n)
	}
	t.Logf("drained %d entries in %v (%.0f entries/s), %d frames, %d events (%.4f per entry)",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), ls.Frames, len(evs), float64(len(evs))/n)
}
