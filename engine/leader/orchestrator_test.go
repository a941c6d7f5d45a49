package leader_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/engine/leader"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/tools"
)

const gatedPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: gated}
workflow:
  - step: start
    tool: {kind: gate}
`

// setupLog returns a pool, a fresh schema and a PostgreSQL event log in
// it, closed after the test.
func setupLog(t *testing.T) (*pgxpool.Pool, string, *pglog.Log) {
	t.Helper()
	pool, schema := setup(t)
	log, err := pglog.New(context.Background(), pool, pglog.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	return pool, schema, log
}

// gateTool registers the gate tool: each call signals entered (if it has
// room) and blocks until release is closed or its command is cancelled.
func gateTool(entered chan<- struct{}, release <-chan struct{}) *tools.Registry {
	reg := tools.NewRegistry()
	reg.MustRegister("gate", tools.ToolFunc(func(ctx context.Context, _ *tools.Call) (tools.Output, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
			return tools.Output{Status: tools.StatusSuccess}, nil
		case <-ctx.Done():
			return tools.Output{Status: tools.StatusError, Error: ctx.Err().Error()}, nil
		}
	}))
	return reg
}

// replicaUnderTest is one Orchestrator running in the background.
type replicaUnderTest struct {
	o    *leader.Orchestrator
	stop func()
}

// TestOrchestratorLeadsAndResumesOnTakeover runs two orchestrators on
// one PostgreSQL log: only the leader starts executions, the standby
// answers ErrStandby, and when the leader stops mid-execution the standby
// takes over and finishes the execution from the log.
func TestOrchestratorLeadsAndResumesOnTakeover(t *testing.T) {
	t.Parallel()
	pool, schema, log := setupLog(t)
	ctx := context.Background()
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	reg := gateTool(entered, release)
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	start := func(owner string) *replicaUnderTest {
		o, err := leader.NewOrchestrator(leader.OrchestratorConfig{
			Lease:  newLease(t, pool, schema, owner),
			Log:    log,
			Engine: engine.Config{Tools: reg, Workers: 2, Tick: 5 * time.Millisecond, Logger: logger},
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = o.Run(rctx) }()
		r := &replicaUnderTest{o: o, stop: func() { cancel(); <-done }}
		t.Cleanup(r.stop)
		return r
	}
	a := start("a")
	waitLeading(t, a.o)
	b := start("b")

	if _, err := b.o.Start(ctx, []byte(gatedPlaybook), engine.StartOptions{}); !errors.Is(err, leader.ErrStandby) || !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("Start on the standby: %v, want ErrStandby wrapping api.ErrUnavailable", err)
	}
	if err := b.o.Ready(ctx); err == nil {
		t.Fatal("the standby reports ready")
	}
	id, err := a.o.Start(ctx, []byte(gatedPlaybook), engine.StartOptions{File: "gated.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	waitEntered(t, entered)

	a.stop() // releases the lease: b takes over and resumes the execution
	if a.o.Leading() {
		t.Fatal("a still leads after Run returned")
	}
	if err := a.o.Cancel(ctx, id); !errors.Is(err, leader.ErrStandby) {
		t.Fatalf("Cancel on the stopped replica: %v, want ErrStandby", err)
	}
	waitLeading(t, b.o)
	waitEntered(t, entered) // the resumed execution re-issued the step on b
	close(release)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sum, err := b.o.Wait(wctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("execution ended %s, want completed", sum.Status)
	}
}

func waitLeading(t *testing.T, o *leader.Orchestrator) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !o.Leading() {
		if time.Now().After(deadline) {
			t.Fatal("the orchestrator did not lead within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitEntered(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the gate step did not start")
	}
}

func TestOrchestratorConfig(t *testing.T) {
	t.Parallel()
	if _, err := leader.NewOrchestrator(leader.OrchestratorConfig{}); err == nil {
		t.Fatal("want an error without Lease")
	}
}

// TestOrchestratorRefreshesTheProjection: while leading, the orchestrator
// brings every unfinished execution's projected status up to date and
// saves its snapshot, without anyone asking for the status.
func TestOrchestratorRefreshesTheProjection(t *testing.T) {
	t.Parallel()
	pool, schema, log := setupLog(t)
	ctx := context.Background()
	release := make(chan struct{})
	defer close(release)
	reg := gateTool(make(chan struct{}, 4), release)
	proj, err := engine.NewProjection(engine.ProjectionConfig{Log: log, SnapshotEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	o, err := leader.NewOrchestrator(leader.OrchestratorConfig{
		Lease: newLease(t, pool, schema, "a"), Log: log, Projection: proj, RefreshEvery: 10 * time.Millisecond,
		Engine: engine.Config{Tools: reg, Workers: 1, Tick: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = o.Run(rctx) }()
	defer func() { cancel(); <-done }()
	waitLeading(t, o)
	id, err := o.Start(ctx, []byte(gatedPlaybook), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap, err := log.LoadSnapshot(ctx, id, engine.SnapshotFormat)
		if err == nil && snap.Seq >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot of the running execution after 10s (%v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
