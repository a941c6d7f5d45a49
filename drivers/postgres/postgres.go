package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/sqlcursor"
	"github.com/cursorflow/cursorflow/drivers/internal/clientcache"
	"github.com/cursorflow/cursorflow/internal/pgretry"
)

// DefaultMaxConns is the default size of each connection pool.
const DefaultMaxConns = 8

// Config configures a Driver.
type Config struct {
	// MaxConns caps each pool; the driver keeps one pool per credential.
	// A claim holds a connection from the claim until the engine has
	// recorded it (one round trip to the event log); frames beyond MaxConns
	// wait for one. Defaults to DefaultMaxConns (8).
	MaxConns int
	// Logger receives connection-loss retries and option warnings when a
	// Spec carries no logger of its own. Defaults to slog.Default().
	Logger *slog.Logger
}

// Driver is the postgres cursor driver. It keeps one pgx pool per
// credential URL; Open is cheap. Safe for concurrent use.
type Driver struct {
	cfg   Config
	log   *slog.Logger
	pools *clientcache.Cache[*pgxpool.Pool]
}

var (
	_ cursor.Driver           = (*Driver)(nil)
	_ cursor.TemplateOptioner = (*Driver)(nil)
)

// New returns a driver. Pools are created lazily, by the first Open of
// each credential.
func New(cfg Config) *Driver {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Driver{cfg: cfg, log: log, pools: clientcache.New(func(p *pgxpool.Pool) error {
		p.Close()
		return nil
	})}
}

// Features reports what the postgres driver guarantees: transactional
// claims (a claim commits only once the engine recorded it, and rolls
// back when its claimer dies, or stalls with its connection open for
// longer than the frame lease). Attempts and dead-lettering depend on the
// claim returning an attempts column and on a dead_letter statement.
func (d *Driver) Features() cursor.Features {
	return cursor.Features{
		TransactionalClaim: true,
		BatchClaim:         true,
		DeadLetter:         true,
		ClaimTemplate:      true,
		Attempts:           true,
	}
}

// TemplateOptions names the options the driver renders itself per call
// (ack, release, dead_letter); the engine passes them unrendered.
func (d *Driver) TemplateOptions() []string { return sqlcursor.TemplateOptions() }

// OptionKeys lists the options the driver reads (cursor.OptionKeyLister).
func (d *Driver) OptionKeys() []string { return sqlcursor.OptionKeys() }

// Open returns a cursor over spec's claim on the database that
// spec.Credential (a postgres:// URL or key=value DSN) names.
func (d *Driver) Open(ctx context.Context, spec cursor.Spec) (cursor.Cursor, error) {
	pool, err := d.pool(ctx, spec.Credential)
	if err != nil {
		return nil, &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "open", Err: err}
	}
	log := spec.Logger
	if log == nil {
		log = d.log
	}
	cur, err := sqlcursor.New(spec, &executor{pool: pool, log: log, begin: beginFor(spec.Lease)}, d.log)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return cur, nil
}

func (d *Driver) pool(ctx context.Context, credential string) (*pgxpool.Pool, error) {
	return d.pools.Get(credential, func() (*pgxpool.Pool, error) { return d.newPool(ctx, credential) })
}

func (d *Driver) newPool(ctx context.Context, credential string) (*pgxpool.Pool, error) {
	if credential == "" {
		return nil, errors.New("empty credential")
	}
	pc, err := pgxpool.ParseConfig(credential)
	if err != nil {
		// The parse error may quote the connection string, password and
		// all; say only what is wrong with it.
		return nil, errors.New("the credential is not a valid postgres connection string")
	}
	pc.MaxConns = int32(min(d.cfg.MaxConns, 1<<30))
	pgretry.BoundConnect(&pc.ConnConfig.Config, credential)
	p, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	return p, nil
}

// Close closes every pool. Cursors opened earlier fail afterwards.
func (d *Driver) Close() error { return d.pools.Close() }
