package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is river's no-op job.
type noopArgs struct {
	Seq int `json:"seq"`
}

// Kind implements river.JobArgs.
func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverBurnDown inserts n no-op jobs into river's tables in schema (migrated
// here), then measures from the client's Start until it has completed all
// n, counted from its job_completed events. It checks afterwards that the
// table holds n completed jobs and nothing else.
func riverBurnDown(ctx context.Context, c config, schema string, n int) (result, error) {
	pool, err := poolOf(ctx, c.dsn, 24)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return result{}, err
	}
	defer func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") }()
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return result{}, err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return result{}, fmt.Errorf("river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		Schema:        schema,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.riverWorkers}},
		Workers:       workers,
		FetchCooldown: c.riverCool,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return result{}, err
	}
	const chunk = 10_000
	for done := 0; done < n; done += chunk {
		params := make([]river.InsertManyParams, 0, min(chunk, n-done))
		for i := done; i < min(done+chunk, n); i++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{Seq: i}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return result{}, fmt.Errorf("river insert: %w", err)
		}
	}
	// Room for every event: a full channel drops events, and a dropped
	// job_completed would leave the wait below hanging.
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: n + 1,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}})
	defer cancel()
	r, err := measure(c, func() (int64, error) {
		if err := client.Start(ctx); err != nil {
			return 0, err
		}
		completed := 0
		for completed < n {
			select {
			case ev := <-events:
				if ev.Kind != river.EventKindJobCompleted {
					return 0, fmt.Errorf("river job %d: %s", ev.Job.ID, ev.Kind)
				}
				completed++
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return 0, nil
	})
	stopCtx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	if serr := client.Stop(stopCtx); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		return result{}, err
	}
	return r, checkRiver(ctx, pool, schema, n)
}

// checkRiver checks that river's job table holds n jobs, all completed.
func checkRiver(ctx context.Context, pool *pgxpool.Pool, schema string, n int) error {
	var completed, total int
	err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FROM `+schema+`.river_job`).Scan(&completed, &total)
	if err != nil {
		return err
	}
	if completed != n || total != n {
		return fmt.Errorf("river: %d of %d jobs completed, want %d", completed, total, n)
	}
	return nil
}
