package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// TestShutdownRecordsFramesItCutShort: a Shutdown whose deadline cuts a
// cursor frame short still records the frame's outcome: the rows it did
// not run went back to the source, and the log says so, so that a resume
// does not run them again while another claimer may have taken them.
func TestShutdownRecordsFramesItCutShort(t *testing.T) {
	t.Parallel()
	db, path := jobsQueue(t, 5)
	started := make(chan struct{})
	var calls atomic.Int32
	reg := tools.NewRegistry()
	// A row runs until it is cancelled.
	reg.MustRegister("block", tools.ToolFunc(func(ctx context.Context, _ *tools.Call) (tools.Output, error) {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-ctx.Done()
		return tools.Output{}, ctx.Err()
	}))
	e, log := sqliteEngine(t, path, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(jobsPlaybook([]string{jobsRelease}, 1, `{max_rows: 5, row_concurrency: 1, process: row}`, `{kind: block}`)), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the first row never started")
	}
	expired, stop := context.WithCancel(ctx)
	stop()
	if err := e.Shutdown(expired); err == nil {
		t.Fatal("Shutdown with an expired context cut nothing short")
	}
	var pending int
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE status = 'pending'`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	released := -1
	for _, ev := range evs {
		if ev.Type == eventlog.TypeFrameDone {
			var p struct {
				Released int `json:"released"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			released = p.Released
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d rows started; want 1 (nothing starts once the shutdown cut the frame short)", n)
	}
	if pending != 5 || released != 5 {
		t.Fatalf("%d rows back in the source, the log's frame.done says %d released (-1: none recorded); want 5 and 5", pending, released)
	}
}
