package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/eventlog"
	pglog "github.com/cursorflow/cursorflow/eventlog/postgres"
)

// errDriven is the error of a run or resume whose execution another
// process drives: two orchestrators deciding for one execution write
// conflicting events to its log.
var errDriven = errors.New("another process is driving this execution (a run or resume of it is still going); wait for it to end, or stop it, then resume")

// errLockLost is the error of a run or resume whose PostgreSQL session
// holding the execution's lock went away (a server restart, an idle
// timeout, a proxy's cut) while another process took the lock: that
// process drives the execution now, so this one stops.
var errLockLost = errors.New("lost the execution's lock to another process, which drives it now; this process stopped")

// lockCheckEvery is how often a run makes sure that its PostgreSQL session
// holding the execution's lock is still there.
const lockCheckEvery = time.Second

// execLock is a run's hold on its execution.
type execLock struct {
	// release gives the lock up (at the end of the run).
	release func()
	// lost receives errLockLost once if the lock is gone to another
	// process; nil when the lock cannot go while the process lives.
	lost <-chan error
}

// lockExecution takes the execution's lock for this process's lifetime, so
// that no second run or resume drives it at the same time: a file lock
// beside a SQLite log, a session advisory lock on a PostgreSQL log's
// server. A memory log is this process's alone. The lock goes with the
// process, however it ends. A PostgreSQL session can end before the
// process does: the lock is checked every lockCheckEvery and taken again
// on a new session (at every check while the server does not answer),
// or, when another process was quicker, lost (see execLock.lost).
func lockExecution(ctx context.Context, logURL string, log eventlog.Log, id string, logger *slog.Logger) (*execLock, error) {
	if path, ok := strings.CutPrefix(logURL, "sqlite:"); ok {
		path = strings.TrimPrefix(path, "//")
		// One lock per log file, however it is named: a symlink or a
		// relative path reaches the same locks as the file's own path.
		if real, err := filepath.EvalSymlinks(path); err == nil {
			path = real
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		release, err := lockFile(path+".locks", id)
		if err != nil {
			return nil, err
		}
		return &execLock{release: release}, nil
	}
	pl, ok := log.(*pglog.Log)
	if !ok {
		return &execLock{release: func() {}}, nil
	}
	key := "cursorflow execution " + id
	conn, err := tryAdvisoryLock(ctx, pl.Pool(), key)
	if err != nil {
		return nil, fmt.Errorf("lock execution %s: %w", id, err)
	}
	if conn == nil {
		return nil, fmt.Errorf("execution %s: %w", id, errDriven)
	}
	lost := make(chan error, 1)
	stop, stopped := make(chan struct{}), make(chan struct{})
	// The checks outlive the run's context: after a Ctrl-C the process
	// still records what its commands finish, under the lock. Each check
	// is bounded instead, so a session gone silent does not hold them.
	lctx := context.WithoutCancel(ctx)
	go func() {
		defer close(stopped)
		t := time.NewTicker(lockCheckEvery)
		defer t.Stop()
		drop := func() {
			if conn != nil {
				// Closing the session releases its advisory locks whatever
				// happens to an unlock.
				_ = conn.Conn().Close(lctx)
				conn.Release()
				conn = nil
			}
		}
		warned := false // once per outage, not at every check
		for {
			select {
			case <-stop:
				drop()
				return
			case <-t.C:
			}
			if conn != nil {
				cctx, cancel := context.WithTimeout(lctx, lockCheckEvery)
				_, err := conn.Exec(cctx, "SELECT 1")
				cancel()
				if err == nil {
					continue
				}
				// The session, and the lock with it, is gone.
				drop()
			}
			// Take the lock again unless another process has; a server
			// that does not answer is asked again at the next check.
			cctx, cancel := context.WithTimeout(lctx, lockCheckEvery)
			again, err := tryAdvisoryLock(cctx, pl.Pool(), key)
			cancel()
			switch {
			case err != nil:
				if !warned {
					logger.Warn("the session holding the execution's lock ended and the lock cannot be taken again yet; asking again every "+lockCheckEvery.String(), "execution_id", id, "error", err)
					warned = true
				}
			case again == nil:
				lost <- fmt.Errorf("execution %s: %w", id, errLockLost)
				<-stop
				return
			default:
				logger.Warn("the session holding the execution's lock ended; took the lock again", "execution_id", id)
				conn, warned = again, false
			}
		}
	}()
	return &execLock{
		release: func() { close(stop); <-stopped },
		lost:    lost,
	}, nil
}

// tryAdvisoryLock takes the session advisory lock named key on a
// connection of pool and returns that connection, which holds the lock
// for as long as its session lives; nil when another session holds it.
func tryAdvisoryLock(ctx context.Context, pool *pgxpool.Pool, key string) (*pgxpool.Conn, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, key).Scan(&got); err != nil {
		conn.Release()
		return nil, err
	}
	if !got {
		conn.Release()
		return nil, nil
	}
	return conn, nil
}
