package engine

import (
	"context"
	"os"
	"time"
)

// WorkerInfo describes a worker as its last capacity report did: where
// commands reach it, what it can take and how busy it is.
type WorkerInfo struct {
	// ID names the worker (worker_id in the events it reports).
	ID string `json:"id"`
	// Pool is the pool whose commands it takes (spec.pool).
	Pool string `json:"pool"`
	// Labels are what steps may target it by (spec.worker_labels).
	Labels map[string]string `json:"labels,omitempty"`
	// Slots is how many commands it runs at once; Free how many more it
	// can take now; Running how many it runs.
	Slots   int `json:"slots"`
	Free    int `json:"free"`
	Running int `json:"running"`
	// Host is the machine it runs on.
	Host string `json:"host,omitempty"`
	// StartedAt is when it started; SeenAt when its last report came.
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
}

// WorkerLister lists the live workers a process knows of (GET
// /v1/workers). *Engine lists its in-process workers; natsjs.Registry
// the workers that report over NATS.
type WorkerLister interface {
	Workers(ctx context.Context) ([]WorkerInfo, error)
}

// LocalPool is the pool the in-process workers of an Engine report.
const LocalPool = "local"

// Workers implements WorkerLister: the engine's in-process workers, as
// one worker with Config.Workers slots (none when it runs the
// orchestrator only). After Close or Shutdown it returns ErrClosed.
func (e *Engine) Workers(ctx context.Context) ([]WorkerInfo, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	if e.queue == nil || e.cfg.Workers <= 0 {
		return []WorkerInfo{}, nil
	}
	busy := int(e.busy.Load())
	host, _ := os.Hostname()
	return []WorkerInfo{{
		ID: e.cfg.WorkerID, Pool: LocalPool, Slots: e.cfg.Workers, Free: max(0, e.cfg.Workers-busy), Running: busy,
		Host: host, StartedAt: e.started, SeenAt: e.cfg.Clock.Now(),
	}}, nil
}
