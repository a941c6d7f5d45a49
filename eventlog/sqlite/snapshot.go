package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

var _ eventlog.Snapshots = (*Log)(nil)

// SaveSnapshot implements eventlog.Snapshots: one conditional upsert on
// the write connection, taking its turn with appends.
func (l *Log) SaveSnapshot(ctx context.Context, snap eventlog.Snapshot) (saved bool, err error) {
	if l.state.Closed() {
		return false, eventlog.ErrClosed
	}
	if err := eventlog.ValidateSnapshot(snap); err != nil {
		return false, err
	}
	if l.readOnly {
		return false, fmt.Errorf("%s: save snapshot: %w", l.path, ErrReadOnly)
	}
	select {
	case l.slot <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	case <-l.state.Done():
		return false, eventlog.ErrClosed
	}
	defer func() { <-l.slot }()
	if l.state.Closed() {
		return false, eventlog.ErrClosed
	}
	if l.w == nil {
		if l.w, err = l.connect(ctx, false); err != nil {
			return false, err
		}
	}
	res, err := l.w.conn.ExecContext(ctx, `INSERT INTO snapshots (execution_id, format, seq, data, saved_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (execution_id, format) DO UPDATE SET seq = excluded.seq, data = excluded.data, saved_at = excluded.saved_at
		WHERE snapshots.seq < excluded.seq`, snap.ExecutionID, snap.Format, snap.Seq, snap.Data, time.Now().UnixNano())
	if err != nil {
		return false, l.state.OpErr(ctx, "sqlite", "save snapshot", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, l.state.OpErr(ctx, "sqlite", "save snapshot", err)
	}
	return n == 1, nil
}

// LoadSnapshot implements eventlog.Snapshots.
func (l *Log) LoadSnapshot(ctx context.Context, executionID, format string) (eventlog.Snapshot, error) {
	if l.state.Closed() {
		return eventlog.Snapshot{}, eventlog.ErrClosed
	}
	snap := eventlog.Snapshot{ExecutionID: executionID, Format: format}
	err := l.readDB.QueryRowContext(ctx, `SELECT seq, data FROM snapshots WHERE execution_id = ? AND format = ?`,
		executionID, format).Scan(&snap.Seq, &snap.Data)
	if errors.Is(err, sql.ErrNoRows) {
		return eventlog.Snapshot{}, eventlog.ErrNoSnapshot
	}
	if err != nil {
		return eventlog.Snapshot{}, l.readErr(ctx, "load snapshot", err)
	}
	return snap, nil
}
