package postgres

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/eventlog/internal/sqllog"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations returns the embedded migrations, ordered by version, with
// {{schema}} replaced by the quoted schema name and {{schema_literal}} by
// that name as a string literal (for statements built in PL/pgSQL).
func migrations(schema string) ([]sqllog.Migration, error) {
	ms, err := sqllog.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	fill := strings.NewReplacer("{{schema}}", schema, "{{schema_literal}}", "'"+strings.ReplaceAll(schema, "'", "''")+"'")
	for i := range ms {
		ms[i].SQL = fill.Replace(ms[i].SQL)
	}
	return ms, nil
}

// migrate creates the schema and applies the pending migrations while
// holding a session advisory lock derived from the schema name, so that
// processes starting together apply each migration once.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	quoted := pgx.Identifier{schema}.Sanitize()
	ms, err := migrations(quoted)
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	lockKey := "cursorflow.eventlog:" + schema
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", lockKey); err != nil {
		return fmt.Errorf("advisory lock: %w", err)
	}
	defer func() {
		// Unlock even when ctx is done; if that fails the lock dies with the
		// connection, so close it instead of returning it to the pool.
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtextextended($1, 0))", lockKey); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS %[1]s;
		CREATE TABLE IF NOT EXISTS %[1]s.schema_version (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`, quoted), pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	var applied int
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT coalesce(max(version), 0) FROM %s.schema_version", quoted)).Scan(&applied); err != nil {
		return fmt.Errorf("read schema_version: %w", err)
	}
	for _, m := range ms {
		if m.Version <= applied {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s.schema_version (version, name) VALUES ($1, $2)", quoted), m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}
