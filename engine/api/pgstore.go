package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultPostgresSchema is the schema PostgresStore uses without one
// ("cursorflow", the event log's default too).
const DefaultPostgresSchema = "cursorflow"

// PostgresStore is a Store in the PostgreSQL table SCHEMA.playbooks(name,
// version, source, registered_at), shared by every server replica.
type PostgresStore struct {
	pool  *pgxpool.Pool
	table string // quoted schema.playbooks
}

var _ Store = (*PostgresStore)(nil)

// NewPostgresStore creates the schema and table if they do not exist and
// returns a store on pool. schema defaults to DefaultPostgresSchema. The
// pool stays the caller's to close.
func NewPostgresStore(ctx context.Context, pool *pgxpool.Pool, schema string) (*PostgresStore, error) {
	if pool == nil {
		return nil, errors.New("api: NewPostgresStore: pool is required")
	}
	if schema == "" {
		schema = DefaultPostgresSchema
	}
	q := pgx.Identifier{schema}.Sanitize()
	st := &PostgresStore{pool: pool, table: q + ".playbooks"}
	// Concurrent CREATE ... IF NOT EXISTS can still collide in the catalog;
	// a transaction-scoped advisory lock serialises replicas starting
	// together. (A session lock released in the same multi-statement
	// query would be released before the implicit transaction commits,
	// letting the next replica miss the uncommitted table.)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "cursorflow.playbooks:"+schema); err != nil {
			return err
		}
		stmts := []string{
			`CREATE SCHEMA IF NOT EXISTS ` + q,
			`CREATE TABLE IF NOT EXISTS ` + st.table + ` (
	name          text        NOT NULL,
	version       integer     NOT NULL,
	source        text        NOT NULL,
	registered_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (name, version)
)`,
		}
		for _, stmt := range stmts {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("api: playbook store: create table: %w", err)
	}
	return st, nil
}

// Put implements Store. Two replicas registering the same name at once
// both succeed, one version after the other; registering one source at
// once stores it once. A name with a control character or invalid UTF-8
// is refused: PostgreSQL text holds no NUL byte, and Get could not find
// it.
func (p *PostgresStore) Put(ctx context.Context, name, source string) (Playbook, bool, error) {
	if !validID(name) {
		return Playbook{}, false, fmt.Errorf("api: playbook store: name %s: want UTF-8 text without control characters", strconv.QuoteToASCII(name))
	}
	pb, created := Playbook{Name: name}, false
	// The name's lock, held until the transaction ends, makes reading the
	// latest version and inserting the next one a unit: without it two
	// registrations of one source both found it missing and stored it
	// twice, as two versions.
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, p.table+":"+name); err != nil {
			return err
		}
		var latest string
		err := tx.QueryRow(ctx, `SELECT version, source, registered_at FROM `+p.table+`
			WHERE name = $1 ORDER BY version DESC LIMIT 1`, name).Scan(&pb.Version, &latest, &pb.RegisteredAt)
		switch {
		case err == nil && latest == source:
			pb.Source = latest
			return nil
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		created = true
		pb.Source = source
		return tx.QueryRow(ctx, `INSERT INTO `+p.table+` (name, version, source)
			SELECT $1, coalesce(max(version), 0) + 1, $2 FROM `+p.table+` WHERE name = $1
			RETURNING version, registered_at`, name, source).Scan(&pb.Version, &pb.RegisteredAt)
	})
	if err != nil {
		return Playbook{}, false, fmt.Errorf("api: playbook store: put %s: %w", name, err)
	}
	pb.RegisteredAt = pb.RegisteredAt.UTC()
	return pb, created, nil
}

// Get implements Store.
func (p *PostgresStore) Get(ctx context.Context, name string, version int) (Playbook, error) {
	if !validID(name) || version > MaxPlaybookVersion {
		// No row holds either, and the database would refuse the query
		// (a NUL byte, invalid UTF-8, an int4 overflow) rather than find
		// nothing.
		return Playbook{}, ErrPlaybookNotFound
	}
	pb := Playbook{Name: name}
	var err error
	if version == 0 {
		err = p.pool.QueryRow(ctx, `SELECT version, source, registered_at FROM `+p.table+`
			WHERE name = $1 ORDER BY version DESC LIMIT 1`, name).Scan(&pb.Version, &pb.Source, &pb.RegisteredAt)
	} else {
		err = p.pool.QueryRow(ctx, `SELECT version, source, registered_at FROM `+p.table+`
			WHERE name = $1 AND version = $2`, name, version).Scan(&pb.Version, &pb.Source, &pb.RegisteredAt)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Playbook{}, ErrPlaybookNotFound
	}
	if err != nil {
		return Playbook{}, fmt.Errorf("api: playbook store: get %s: %w", name, err)
	}
	pb.RegisteredAt = pb.RegisteredAt.UTC()
	return pb, nil
}

// List implements Store.
func (p *PostgresStore) List(ctx context.Context) ([]Playbook, error) {
	rows, err := p.pool.Query(ctx, `SELECT DISTINCT ON (name) name, version, registered_at FROM `+p.table+`
		ORDER BY name, version DESC`)
	if err != nil {
		return nil, fmt.Errorf("api: playbook store: list: %w", err)
	}
	out := []Playbook{}
	for rows.Next() {
		var pb Playbook
		if err := rows.Scan(&pb.Name, &pb.Version, &pb.RegisteredAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("api: playbook store: list: %w", err)
		}
		pb.RegisteredAt = pb.RegisteredAt.UTC()
		out = append(out, pb)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("api: playbook store: list: %w", err)
	}
	return out, nil
}
