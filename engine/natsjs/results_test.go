package natsjs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/internal/resulttest"
	"github.com/cursorflow/cursorflow/resultstore"
	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// s3Store opens the test environment's S3 server under a prefix of its
// own, removed when the test ends.
func s3Store(t *testing.T) *resultstore.Store {
	t.Helper()
	store, err := resultstoreurl.Open(context.Background(), resulttest.S3(t, "natsjs"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

const fiveMB = 5_000_000

const bigResultFlow = `
workflow:
  - step: start
    tool: {kind: big}
    next:
      - step: check
        when: '{{ start.blob | length == 5000000 }}'
  - step: check
    tool: {kind: rec, key: check, value: '{{ start.blob | length }}'}
`

func bigTool(reg *tools.Registry) {
	reg.MustRegister("big", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		return map[string]any{"blob": strings.Repeat("x", fiveMB)}, nil
	}))
}

// TestLargeResultThroughNATS: a 5 MB result, through NATS with the S3
// result store: no command and no report carries it (NATS's max_payload
// is 1 MB), the orchestrator routes on it and a worker reads it. Without
// a store the result cannot travel, and the command fails saying so.
func TestLargeResultThroughNATS(t *testing.T) {
	store := s3Store(t)
	b := setupWith(t, time.Minute, 5*time.Second, func(c *engine.Config) { c.Results = store })
	b.tools = bigTool
	w, _ := b.worker(t, "w1", "", 5*time.Second)
	sum, evs := b.run(t, bigResultFlow)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("with the store: %s %s", sum.Status, sum.Error)
	}
	check := sum.Results["check"].(map[string]any)["data"].(map[string]any)
	if check["value"] != int64(fiveMB) {
		t.Fatalf("check read %v, want the stored blob's length", check["value"])
	}
	total, largest := 0, 0
	for _, ev := range evs {
		total += len(ev.Payload)
		largest = max(largest, len(ev.Payload))
	}
	maxCmd, maxReport := b.disp.Stats().MaxCommandBytes.Load(), w.Stats().MaxReportBytes.Load()
	if largest > 16<<10 || maxCmd > 64<<10 || maxReport > 64<<10 {
		t.Fatalf("with the store: largest event payload %d, command %d, report %d bytes", largest, maxCmd, maxReport)
	}
	t.Logf("5 MB result with the S3 store: event payloads %d bytes in all (largest %d), largest NATS command %d bytes, largest report %d bytes",
		total, largest, maxCmd, maxReport)

	plain := setup(t, time.Minute, 5*time.Second)
	plain.tools = bigTool
	pw, _ := plain.worker(t, "w2", "", 5*time.Second)
	psum, pevs := plain.runToEnd(t, bigResultFlow)
	if psum.Status != engine.StatusFailed || psum.Step != "start" || !strings.Contains(psum.Error, "more than a NATS message may carry") {
		t.Fatalf("without a store: %+v", psum)
	}
	if pw.Stats().TooLarge.Load() != 1 || logtest.CountType(pevs, eventlog.TypeCommandFailed) != 1 {
		t.Fatalf("without a store: %d results too large, %d failures", pw.Stats().TooLarge.Load(), logtest.CountType(pevs, eventlog.TypeCommandFailed))
	}
	t.Logf("5 MB result without a store: the report (%d+ bytes) exceeds NATS's max_payload (%d); the step fails: %s",
		fiveMB, plain.cfg.Conn.MaxPayload(), psum.Error)
}
