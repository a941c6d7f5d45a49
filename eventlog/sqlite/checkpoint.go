package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// A Log checkpoints its WAL (copies the committed pages into the main
// file) on a connection and goroutine of its own, not in the appends.
// SQLite's automatic checkpoint runs inside the commit that crosses
// wal_autocheckpoint pages: with frame-sized appends one append in about
// eighty paid for copying the thousand pages before it, and every claim
// waiting for its record waited with it. Measured on a 2-core machine
// (examples/bench, frame/sqlite, 4 pairs of runs): the claim window's p99
// fell from 15-19 ms to 12-13 ms; the append's CPU is the same, and the
// drain's rate moved within the runs' noise.
const (
	// checkpointDelay is how long after an append the checkpointer copies
	// what was appended: appends within it share the copy and its flush.
	checkpointDelay = 25 * time.Millisecond
	// walRestartFrames is the WAL length (in pages) past which the
	// checkpointer makes sure the WAL starts over: SQLite's default
	// wal_autocheckpoint. A WAL restarts from its beginning at the first
	// append after a checkpoint that copied all of it, which a
	// checkpoint running beside the appends seldom does.
	walRestartFrames = 1000
)

// checkpointer is a Log's WAL checkpointer.
type checkpointer struct {
	db *sql.DB // one connection of its own
	// kick is sent (without blocking) after every append.
	kick    chan struct{}
	stopped chan struct{}
}

// startCheckpointer opens the checkpointer's connection on dsn (the
// writer's: wal_autocheckpoint off) and starts it; it runs until the log
// closes.
func (l *Log) startCheckpointer(dsn string) error {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	ck := &checkpointer{db: db, kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	l.ckpt = ck
	go l.checkpoints(ck)
	return nil
}

// appended tells the checkpointer that an append committed (nothing on
// a read-only log, which has none).
func (ck *checkpointer) appended() {
	if ck == nil {
		return
	}
	select {
	case ck.kick <- struct{}{}:
	default:
	}
}

// checkpoints is the checkpointer's loop: after an append, wait
// checkpointDelay, then checkpoint.
func (l *Log) checkpoints(ck *checkpointer) {
	defer close(ck.stopped)
	done := l.state.Done()
	delay := time.NewTimer(checkpointDelay)
	delay.Stop()
	for {
		select {
		case <-done:
			return
		case <-ck.kick:
		}
		delay.Reset(checkpointDelay)
		select {
		case <-done:
			delay.Stop()
			return
		case <-delay.C:
		}
		l.checkpoint(ck)
	}
}

// checkpoint copies the WAL's committed pages into the main file beside
// the appends (SQLite's PASSIVE checkpoint, which waits for no one).
// Once the WAL is walRestartFrames long it copies again while holding
// the writer slot, so that nothing of this process is appended meanwhile:
// that copy takes all of the WAL (the pages appended since the first
// copy), and the next append starts the WAL over instead of growing it.
// A failed checkpoint (another process checkpointing, a full disk) only
// leaves the WAL longer until the next one.
func (l *Log) checkpoint(ck *checkpointer) {
	ctx := context.Background()
	if ck.run(ctx) < walRestartFrames {
		return
	}
	select {
	case l.slot <- struct{}{}:
	case <-l.state.Done():
		return
	}
	defer func() { <-l.slot }()
	ck.run(ctx)
}

// run runs one PASSIVE checkpoint and returns the WAL's length in pages
// (-1 when SQLite cannot say).
func (ck *checkpointer) run(ctx context.Context) (walFrames int64) {
	var busy, copied int64
	if err := ck.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &walFrames, &copied); err != nil {
		return -1
	}
	return walFrames
}

// stop waits for the checkpointer to end (the log is closing) and closes
// its connection.
func (ck *checkpointer) stop() error {
	<-ck.stopped
	return ck.db.Close()
}
