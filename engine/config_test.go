package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// Negative workers with no Dispatcher would leave every command in a
// queue nobody reads: New refuses them, and keeps 0 as the default.
func TestNewRefusesNegativeWorkers(t *testing.T) {
	log := eventlog.NewMemory()
	defer log.Close()
	if e, err := engine.New(engine.Config{Log: log, Workers: -1}); !errors.Is(err, engine.ErrConfig) {
		if e != nil {
			_ = e.Close()
		}
		t.Fatalf("New with Workers -1: %v, want ErrConfig", err)
	}
	e, err := engine.New(engine.Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ws, err := e.Workers(t.Context())
	if err != nil || len(ws) != 1 || ws[0].Slots != engine.DefaultWorkers {
		t.Fatalf("Workers with Config.Workers 0 = %+v, %v; want one with %d slots", ws, err, engine.DefaultWorkers)
	}
}

func TestWorkersAfterCloseFails(t *testing.T) {
	log := eventlog.NewMemory()
	defer log.Close()
	e, err := engine.New(engine.Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.Close()
	if ws, err := e.Workers(t.Context()); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Workers after Close = %v, %v; want ErrClosed", ws, err)
	}
}

// Shutdown returns ctx's error only when it cut running commands short:
// an idle engine shuts down cleanly even with an expired ctx.
func TestShutdownIdleWithExpiredContext(t *testing.T) {
	log := eventlog.NewMemory()
	defer log.Close()
	for range 20 { // select used to pick the expired ctx at random
		e, err := engine.New(engine.Config{Log: log, Tick: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown of an idle engine with an expired ctx = %v, want nil", err)
		}
	}
}

// TestNewRefusesAMissingLog: a host that misconfigures the engine (no
// event log: an Open whose error it dropped) can tell a refused
// configuration from other failures with errors.Is, as it can for
// natsjs and resultstore.
func TestNewRefusesAMissingLog(t *testing.T) {
	if e, err := engine.New(engine.Config{}); !errors.Is(err, engine.ErrConfig) {
		if e != nil {
			_ = e.Close()
		}
		t.Fatalf("New without a Log: %v, want ErrConfig", err)
	}
	if _, err := engine.NewProjection(engine.ProjectionConfig{}); !errors.Is(err, engine.ErrConfig) {
		t.Fatalf("NewProjection without a Log: %v, want ErrConfig", err)
	}
}
