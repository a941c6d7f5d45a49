package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/cursorflow/cursorflow/eventlog/internal/sqllog"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate applies the pending migrations on conn, each in its own
// IMMEDIATE transaction, so that two processes opening the same file at
// once apply each migration exactly once.
func migrate(ctx context.Context, conn *sql.Conn) error {
	ms, err := sqllog.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_version: %w", err)
	}
	for _, m := range ms {
		if err := applyMigration(ctx, conn, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, conn *sql.Conn, m sqllog.Migration) (err error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM schema_version WHERE version = ?", m.Version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		_, err = conn.ExecContext(ctx, "COMMIT")
		return err
	}
	if _, err := conn.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
		m.Version, m.Name, time.Now().UnixNano()); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}
