package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/eventlog"
)

var _ eventlog.Snapshots = (*Log)(nil)

// SaveSnapshot implements eventlog.Snapshots with one conditional upsert.
func (l *Log) SaveSnapshot(ctx context.Context, snap eventlog.Snapshot) (bool, error) {
	if l.state.Closed() {
		return false, eventlog.ErrClosed
	}
	if err := eventlog.ValidateSnapshot(snap); err != nil {
		return false, err
	}
	bctx, cancel := l.bound(ctx)
	defer cancel()
	tag, err := l.pool.Exec(bctx, l.sql.saveSnapshot, snap.ExecutionID, snap.Format, snap.Seq, snap.Data)
	if err != nil {
		return false, l.opErr(ctx, "save snapshot", err)
	}
	return tag.RowsAffected() == 1, nil
}

// LoadSnapshot implements eventlog.Snapshots.
func (l *Log) LoadSnapshot(ctx context.Context, executionID, format string) (eventlog.Snapshot, error) {
	if l.state.Closed() {
		return eventlog.Snapshot{}, eventlog.ErrClosed
	}
	snap := eventlog.Snapshot{ExecutionID: executionID, Format: format}
	err := l.reread(ctx, func(bctx context.Context) error {
		return l.pool.QueryRow(bctx, l.sql.loadSnapshot, executionID, format).Scan(&snap.Seq, &snap.Data)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return eventlog.Snapshot{}, eventlog.ErrNoSnapshot
	}
	if err != nil {
		return eventlog.Snapshot{}, l.opErr(ctx, "load snapshot", err)
	}
	return snap, nil
}
