package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
)

// Defaults of Config.
const (
	DefaultSchema = "cursorflow"
	DefaultName   = "orchestrator"
	DefaultTTL    = 15 * time.Second
)

// ErrNotLeader is returned by a fenced log's Append once the lease it was
// fenced with may be lost.
var ErrNotLeader = errors.New("leader: not the leader (lease lost or expired)")

// Config configures a Lease.
type Config struct {
	// Pool is the PostgreSQL pool the lease row lives in. Required.
	Pool *pgxpool.Pool
	// Schema holds table leases; it is created if missing. Use the event
	// log's schema. Defaults to DefaultSchema ("cursorflow").
	Schema string
	// Name is the lease's row. Defaults to DefaultName ("orchestrator").
	Name string
	// Owner identifies this process in the row. Defaults to
	// hostname-pid-random.
	Owner string
	// TTL is how long the lease lasts without renewal: a dead leader's
	// successor takes over within TTL plus one poll. Defaults to
	// DefaultTTL (15s).
	TTL time.Duration
	// RenewEvery is how often the leader renews and a standby polls.
	// Defaults to TTL/3.
	RenewEvery time.Duration
	// Logger receives role changes. Defaults to slog.Default().
	Logger *slog.Logger
}

// Lease is a single named leader lease in PostgreSQL: a row with owner,
// token and expires_at, taken with a conditional upsert when expired and
// renewed with a conditional UPDATE. Expiry is judged by the database
// clock; each replica's own deadline is measured on its monotonic clock
// from the moment before it sent the renewal, minus a safety margin, so a
// leader always considers itself deposed before the row can expire.
type Lease struct {
	cfg    Config
	table  string
	guard  string // the function an append runs to check the lease
	margin time.Duration

	mu       sync.Mutex
	held     bool
	token    int64
	deadline time.Time
}

// New creates the leases table if needed.
func New(ctx context.Context, cfg Config) (*Lease, error) {
	if cfg.Pool == nil {
		return nil, errors.New("leader: Config.Pool is required")
	}
	if cfg.TTL < 0 || cfg.RenewEvery < 0 {
		return nil, errors.New("leader: Config.TTL and RenewEvery must not be negative")
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.RenewEvery == 0 {
		cfg.RenewEvery = cfg.TTL / 3
	}
	if cfg.RenewEvery >= cfg.TTL {
		return nil, errors.New("leader: Config.RenewEvery must be shorter than TTL")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	schema := pgx.Identifier{cfg.Schema}.Sanitize()
	l := &Lease{cfg: cfg, table: schema + ".leases", guard: schema + ".cursorflow_assert_lease", margin: cfg.TTL / 5}
	tx, err := cfg.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("leader: create table: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// Two replicas starting at once must not race on CREATE ... IF NOT
	// EXISTS (it is not atomic in PostgreSQL).
	stmts := []string{
		`SELECT pg_advisory_xact_lock(hashtext('cursorflow.leader'))`,
		`CREATE SCHEMA IF NOT EXISTS ` + schema,
		`CREATE TABLE IF NOT EXISTS ` + l.table + ` (
			name       text        PRIMARY KEY,
			owner      text        NOT NULL,
			token      bigint      NOT NULL,
			expires_at timestamptz NOT NULL)`,
		// Run first in every fenced append, in the append's transaction:
		// refuses it unless the lease is still held with the term's
		// token, and holds the lease row so that a successor's takeover
		// waits until the append has committed.
		`CREATE OR REPLACE FUNCTION ` + l.guard + `(lease_name text, lease_token bigint) RETURNS void
		LANGUAGE plpgsql AS $fn$
		BEGIN
			PERFORM 1 FROM ` + l.table + ` WHERE name = lease_name AND token = lease_token AND expires_at >= now() FOR SHARE;
			IF NOT FOUND THEN
				RAISE EXCEPTION 'lease % is no longer held with token %', lease_name, lease_token USING ERRCODE = '` + notLeaderCode + `';
			END IF;
		END
		$fn$`,
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("leader: create table: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("leader: create table: %w", err)
	}
	return l, nil
}

// Owner returns this replica's owner id.
func (l *Lease) Owner() string { return l.cfg.Owner }

// Held reports whether this replica holds the lease now (by its own,
// conservative deadline).
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held && time.Now().Before(l.deadline)
}

// Holder returns the lease row: who holds it and until when (database
// time). owner is empty if the lease was never taken.
func (l *Lease) Holder(ctx context.Context) (owner string, expires time.Time, err error) {
	err = l.cfg.Pool.QueryRow(ctx, `SELECT owner, expires_at FROM `+l.table+` WHERE name = $1`, l.cfg.Name).Scan(&owner, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, nil
	}
	return owner, expires, err
}

// Run campaigns until ctx is done. Whenever this replica holds the lease
// it calls lead with a context that is cancelled as soon as the lease may
// be lost (renewal refused, or no successful renewal before the deadline),
// and waits for lead to return before campaigning again. lead must stop
// everything that writes on the leader's behalf before it returns. When
// ctx ends, Run releases a held lease so a standby takes over at once.
func (l *Lease) Run(ctx context.Context, lead func(ctx context.Context)) error {
	// The end of ctx is how Run is told to stop, not a failure: Run returns
	// nil then.
	standingBy := "" // the holder this replica last said it waits for
	for ctx.Err() == nil {
		start := time.Now()
		token, ok, err := l.acquire(ctx)
		if err != nil && ctx.Err() == nil {
			l.cfg.Logger.Warn("leader: campaign failed", "lease", l.cfg.Name, "error", err)
		}
		if !ok {
			if err == nil {
				// Say once per holder why this replica does nothing yet: a
				// replica started while another's lease runs (a restart
				// after a crash waits out its own old lease) is otherwise
				// silent until it leads.
				if owner, expires, herr := l.Holder(ctx); herr == nil && owner != "" && owner != standingBy {
					standingBy = owner
					l.cfg.Logger.Info("leader: standing by; another replica holds the lease",
						"lease", l.cfg.Name, "holder", owner, "expires_at", expires)
				}
			}
			select {
			case <-time.After(l.cfg.RenewEvery):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		l.mu.Lock()
		l.held, l.token, l.deadline = true, token, start.Add(l.cfg.TTL-l.margin)
		l.mu.Unlock()
		l.cfg.Logger.Info("leader: lease acquired", "lease", l.cfg.Name, "owner", l.cfg.Owner, "token", token)
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); lead(lctx) }()
		reason := l.keep(lctx, token, done)
		// Fence first, then tell lead: nothing appends after this point.
		l.mu.Lock()
		l.held = false
		l.mu.Unlock()
		cancel()
		<-done
		l.cfg.Logger.Warn("leader: stepped down", "lease", l.cfg.Name, "owner", l.cfg.Owner, "token", token, "reason", reason)
		if ctx.Err() != nil || reason == "lead returned" {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			l.release(rctx, token)
			rcancel()
		}
	}
	return nil
}

// keep renews the lease until it is lost, lead returns or ctx is done,
// and says why it stopped.
func (l *Lease) keep(ctx context.Context, token int64, done <-chan struct{}) string {
	renew := time.NewTicker(l.cfg.RenewEvery)
	defer renew.Stop()
	for {
		l.mu.Lock()
		wait := time.Until(l.deadline)
		l.mu.Unlock()
		if wait <= 0 {
			return "no renewal before the deadline"
		}
		expire := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			expire.Stop()
			return "shutting down"
		case <-done:
			expire.Stop()
			return "lead returned"
		case <-expire.C:
			return "no renewal before the deadline"
		case <-renew.C:
			expire.Stop()
			start := time.Now()
			rctx, cancel := context.WithTimeout(ctx, l.cfg.RenewEvery)
			ok, err := l.renew(rctx, token)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					l.cfg.Logger.Warn("leader: renewal failed; retrying", "lease", l.cfg.Name, "error", err)
				}
				continue
			}
			if !ok {
				return "lease taken over"
			}
			l.mu.Lock()
			l.deadline = start.Add(l.cfg.TTL - l.margin)
			l.mu.Unlock()
		}
	}
}

func (l *Lease) acquire(ctx context.Context) (int64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.RenewEvery)
	defer cancel()
	var token int64
	err := l.cfg.Pool.QueryRow(ctx, `
INSERT INTO `+l.table+` AS l (name, owner, token, expires_at)
VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, token = l.token + 1, expires_at = EXCLUDED.expires_at
 WHERE l.expires_at < now()
RETURNING token`, l.cfg.Name, l.cfg.Owner, l.cfg.TTL.Milliseconds()).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return token, true, nil
}

func (l *Lease) renew(ctx context.Context, token int64) (bool, error) {
	tag, err := l.cfg.Pool.Exec(ctx, `UPDATE `+l.table+` SET expires_at = now() + $4 * interval '1 millisecond'
WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at >= now()`, l.cfg.Name, l.cfg.Owner, token, l.cfg.TTL.Milliseconds())
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func (l *Lease) release(ctx context.Context, token int64) {
	_, err := l.cfg.Pool.Exec(ctx, `UPDATE `+l.table+` SET expires_at = now() - interval '1 millisecond'
WHERE name = $1 AND owner = $2 AND token = $3`, l.cfg.Name, l.cfg.Owner, token)
	if err != nil {
		l.cfg.Logger.Warn("leader: release failed; the lease expires on its own", "lease", l.cfg.Name, "error", err)
	}
}

// notLeaderCode is the SQLSTATE the lease guard raises.
const notLeaderCode = "CF001"

// Fence wraps log for the term this replica holds now: its Append fails
// with ErrNotLeader once that term may be over, and runs under a deadline
// that ends before the lease row can expire. Reads pass through. Fence
// returns nil if the lease is not held.
//
// When log is an eventlog/postgres Log in the lease's database, the
// lease is also checked inside every append's own transaction, holding
// the lease row while it commits: a deposed leader can append nothing,
// however late its append reaches the server, and a successor's takeover
// waits for an append in progress. Other logs get the deadline only.
func (l *Lease) Fence(log eventlog.Log) eventlog.Log {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return nil
	}
	f := &fenced{Log: log, append: log, l: l, token: l.token}
	if pl, ok := log.(*postgres.Log); ok && sameDatabase(pl.Pool(), l.cfg.Pool) {
		f.append = pl.WithAppendGuard(postgres.AppendGuard{SQL: `SELECT ` + l.guard + `($1, $2)`, Args: []any{l.cfg.Name, l.token}})
	}
	return f
}

// sameDatabase reports whether two pools reach the same database.
func sameDatabase(a, b *pgxpool.Pool) bool {
	if a == b {
		return true
	}
	ca, cb := a.Config().ConnConfig, b.Config().ConnConfig
	return ca.Host == cb.Host && ca.Port == cb.Port && ca.Database == cb.Database
}

type fenced struct {
	eventlog.Log
	append eventlog.Log // Log, or a view whose appends check the lease in the database
	l      *Lease
	token  int64
}

func (f *fenced) Append(ctx context.Context, events []eventlog.Event) ([]eventlog.Result, error) {
	f.l.mu.Lock()
	held, token, deadline := f.l.held, f.l.token, f.l.deadline
	f.l.mu.Unlock()
	if !held || token != f.token || !time.Now().Before(deadline) {
		return nil, ErrNotLeader
	}
	// deadline is TTL-margin after the renewal was sent; the row expires
	// no earlier than TTL after it: half the margin is left for the
	// cancellation to reach the server.
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(f.l.margin/2))
	defer cancel()
	res, err := f.append.Append(ctx, events)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == notLeaderCode {
		return nil, fmt.Errorf("%w: %s", ErrNotLeader, pgErr.Message)
	}
	return res, err
}
