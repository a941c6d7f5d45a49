package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cursorflow/cursorflow/eventlog"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
)

// errDriven is the error of a run or resume whose execution another
// process drives: two orchestrators deciding for one execution write
// conflicting events to its log.
var errDriven = errors.New("another process is driving this execution (a run or resume of it is still going); wait for it to end, or stop it, then resume")

// lockExecution takes the execution's lock for this process's lifetime, so
// that no second run or resume drives it at the same time: a file lock
// beside a SQLite log, a session advisory lock on a PostgreSQL log's
// server. A memory log is this process's alone. The lock goes with the
// process, however it ends.
func lockExecution(ctx context.Context, logURL string, log eventlog.Log, id string) (release func(), err error) {
	if path, ok := strings.CutPrefix(logURL, "sqlite:"); ok {
		return lockFile(strings.TrimPrefix(path, "//")+".locks", id)
	}
	pl, ok := log.(*pglog.Log)
	if !ok {
		return func() {}, nil
	}
	conn, err := pl.Pool().Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock execution %s: %w", id, err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, "cursorflow execution "+id).Scan(&got); err != nil {
		conn.Release()
		return nil, fmt.Errorf("lock execution %s: %w", id, err)
	}
	if !got {
		conn.Release()
		return nil, fmt.Errorf("execution %s: %w", id, errDriven)
	}
	return func() {
		// Closing the session releases its advisory locks whatever happens
		// to the unlock.
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}, nil
}
