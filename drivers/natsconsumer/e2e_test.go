package natsconsumer_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/natsconsumer"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/builtin"
)

const playbookFile = "../../examples/playbooks/natsconsumer_drain.yaml"

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

// TestPlaybookDrains runs examples/playbooks/natsconsumer_drain.yaml
// through the engine against a 10,000-message stream with 4 frame slots
// and checks that every message was processed and acknowledged exactly
// once.
func TestPlaybookDrains(t *testing.T) {
	const n = 10000
	src, err := os.ReadFile(playbookFile)
	if err != nil {
		t.Fatal(err)
	}
	_, js, base := admin(t)
	name := "E2E_" + randSuffix(t)
	seqs := newStreams(t, js, name, n)
	const consumer = "drain"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	kc := tools.StaticURLs(map[string]string{"nats_queue": base})
	treg, tclose := builtin.NewRegistry(builtin.Options{Keychain: kc})
	t.Cleanup(func() { _ = tclose.Close() })
	creg := cursor.NewRegistry()
	if err := creg.Register("natsconsumer", natsconsumer.New(natsconsumer.Config{})); err != nil {
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
	id, err := e.Start(ctx, src, engine.StartOptions{File: playbookFile, Workload: map[string]any{
		"stream": name, "subject": name + ".jobs", "consumer": consumer, "dead_letter_subject": name + ".dead",
	}})
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

	// The source: every message delivered once and acknowledged.
	c, err := js.Consumer(ctx, name, consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 ||
		info.Delivered.Stream != n || info.AckFloor.Stream != n {
		t.Fatalf("consumer: pending %d, ack pending %d, redelivered %d, delivered %d, ack floor %d; want 0, 0, 0, %d, %d",
			info.NumPending, info.NumAckPending, info.NumRedelivered, info.Delivered.Stream, info.AckFloor.Stream, n, n)
	}
	if dead := deadLettered(t, js, name+"_DEAD"); len(dead) != 0 {
		t.Fatalf("%d messages dead-lettered, want none", len(dead))
	}
	// The engine: every message ran through the body once, successfully.
	items := frameItems(t, evs)
	if len(items) != n {
		t.Fatalf("the engine reported %d distinct keys, want %d", len(items), n)
	}
	for _, k := range seqs {
		if got := items[k]; len(got) != 1 || got[0] != engine.OutcomeOK {
			t.Fatalf("message %s: outcomes %v, want [ok]", k, got)
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
	t.Logf("drained %d messages in %v (%.0f messages/s), %d frames, %d events (%.4f per message)",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), ls.Frames, len(evs), float64(len(evs))/n)
}
