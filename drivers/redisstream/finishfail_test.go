package redisstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/redisstream"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// finishSignal is the redisstream driver, telling when the engine's
// Finish of a loop run returned.
type finishSignal struct {
	*redisstream.Driver
	once     sync.Once
	finished chan struct{}
}

func (d *finishSignal) Finish(ctx context.Context, spec cursor.Spec) error {
	err := d.Driver.Finish(ctx, spec)
	d.once.Do(func() { close(d.finished) })
	return err
}

// TestPlaybookFinishAfterFailure fails an execution (another step fails)
// while a frame of its loop, whose group the driver names, is running:
// the engine removes the group as the execution ends, and the frame,
// cut short, hands its entries back afterwards. That hand-back must not
// create the group again: nothing would ever remove it.
func TestPlaybookFinishAfterFailure(t *testing.T) {
	rdb, base := admin(t)
	stream := newStream(t, rdb, "e2e_failed_")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fill(t, rdb, stream, 20)

	drv := &finishSignal{Driver: redisstream.New(redisstream.Config{}), finished: make(chan struct{})}
	running := make(chan struct{})
	var first sync.Once
	body := fn.New(func(bctx context.Context, _ *tools.Call) (any, error) {
		held := false
		first.Do(func() { held = true; close(running) })
		if !held {
			return nil, nil
		}
		<-bctx.Done()
		// The frame hands its entries back once the group is gone, as
		// it does when the removal wins the race.
		select {
		case <-drv.finished:
		case <-ctx.Done():
		}
		return nil, bctx.Err()
	})
	boom := fn.New(func(bctx context.Context, _ *tools.Call) (any, error) {
		select {
		case <-running:
		case <-bctx.Done():
		}
		return nil, errors.New("boom")
	})
	r := drivertest.Run(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/failed_drain.yaml",
		Kind:         "redisstream",
		Driver:       drv,
		Keychain:     tools.StaticURLs(map[string]string{"redis_queue": base}),
		Workload:     map[string]any{"stream": stream},
		Tools:        map[string]tools.Tool{"body": body, "boom": boom},
		Loop:         "drain#1",
		Shutdown:     true,
	})
	if r.Summary.Status != engine.StatusFailed {
		t.Fatalf("execution %s, want failed", r.Summary.Status)
	}
	select {
	case <-drv.finished:
	default:
		t.Fatal("the loop run's group was never removed")
	}
	if groups := groupNames(t, rdb, stream); len(groups) != 0 {
		t.Fatalf("groups %v left behind by the failed execution, want none", groups)
	}
}
