package natsjs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestCommandTooLargeFailsAtOnce: a playbook, or a workload given at
// start (as the API's run takes one), larger than the NATS server takes in
// one message makes a command no worker can receive. With a lease of a
// minute it used to fail only after three lease expiries, saying "lease
// expired", while the dispatcher logged no cause; it now fails at once,
// saying why and what to do, and no worker ran anything.
func TestCommandTooLargeFailsAtOnce(t *testing.T) {
	b := setup(t, time.Minute, 10*time.Second)
	b.worker(t, "w1", "", 0)
	blob := strings.Repeat("x", int(b.cfg.Conn.MaxPayload())+1024)
	step := "workflow:\n  - step: start\n    tool: {kind: rec, key: big, value: '{{ workload.blob | length }}'}\n"
	for name, c := range map[string]struct {
		src      string
		workload map[string]any
		want     string
	}{
		"playbook": {src: "workload:\n  blob: " + blob + "\n" + step, want: "its playbook is"},
		"workload": {src: "workload:\n  blob: small\n" + step, workload: map[string]any{"blob": blob}, want: "the command is"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			id, err := b.eng.Start(ctx, []byte(header+c.src), engine.StartOptions{File: "t.yaml", Workload: c.workload})
			if err != nil {
				t.Fatal(err)
			}
			sum, err := b.eng.Wait(ctx, id)
			if err != nil {
				t.Fatalf("wait: %v (the lease, not the dispatcher, would end it)", err)
			}
			if sum.Status != engine.StatusFailed || sum.Step != "start" || !strings.Contains(sum.Error, c.want) ||
				!strings.Contains(sum.Error, "more than the NATS server takes in one message") {
				t.Fatalf("summary %+v: want start failed for its size", sum)
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("failed after %s", took)
			}
			evs, err := b.log.Read(ctx, id, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Type == eventlog.TypeCommandIssued && ev.Attempt > 1 {
					t.Errorf("command re-issued: %d %s", ev.Seq, ev.CommandID)
				}
			}
		})
	}
	if n := b.calls.count("big"); n != 0 {
		t.Errorf("the tool ran %d times", n)
	}
}

// TestFrameClaimTooLargeFailsAtOnce: a cursor frame whose claimed rows
// (100 rows of 50 KB) are larger than a NATS message. The claim could
// never travel: the worker's frame.claimed report failed to publish, the
// engine rolled the claim back and re-issued the frame once per lease,
// for ever, with nothing but "report refused ... maximum payload
// exceeded" in the worker's log. Now the loop fails at once, naming the
// step, the size and the limit, and no row is left claimed.
func TestFrameClaimTooLargeFailsAtOnce(t *testing.T) {
	b := setup(t, 3*time.Second, 3*time.Second)
	q := newJobQueue(t, b, 100, 1, nil)
	src := q.playbook(1, 100, "{kind: rec, key: 'job{{ iter.job.id }}'}")
	src = strings.Replace(src, "RETURNING id", "RETURNING id, substr(hex(zeroblob(25000)), 1, 50000) AS pad", 1)
	start := time.Now()
	sum, _ := b.runToEnd(t, src)
	if sum.Status != engine.StatusFailed || sum.Step != "start" || !strings.Contains(sum.Error, "step start") ||
		!strings.Contains(sum.Error, "max_payload") || !strings.Contains(sum.Error, "max_rows") {
		t.Fatalf("summary %s %s %q: want start failed for the claim's size", sum.Status, sum.Step, sum.Error)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("failed after %s", took)
	}
	var claimed int
	if err := q.db.QueryRow(`SELECT count(*) FROM jobs WHERE status != 'pending'`).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	if claimed != 0 {
		t.Errorf("%d rows left claimed or done, want the claim rolled back", claimed)
	}
	for i := 1; i <= 100; i++ {
		if n := b.calls.count(fmt.Sprintf("job%d", i)); n != 0 {
			t.Fatalf("row %d ran %d times", i, n)
		}
	}
}
