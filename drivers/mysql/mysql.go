package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/sqlcursor"
	"github.com/cursorflow/cursorflow/drivers/internal/clientcache"
	"github.com/cursorflow/cursorflow/dsl"
)

// Defaults of Config.
const (
	// DefaultMaxOpenConns is the default size of each connection pool.
	DefaultMaxOpenConns = 8
	// DefaultConnMaxLifetime is how long a pooled connection is reused by
	// default; it stays below MySQL's default wait_timeout (8 hours) and
	// common proxy idle timeouts.
	DefaultConnMaxLifetime = 30 * time.Minute
)

// OptMark is the cursor option holding the statement that marks the rows
// the claim SELECTed as claimed, run in the claim's transaction.
const OptMark = "mark"

// Config configures a Driver.
type Config struct {
	// MaxOpenConns caps each pool; the driver keeps one pool per
	// credential. Defaults to DefaultMaxOpenConns (8).
	MaxOpenConns int
	// ConnMaxLifetime bounds how long a connection is reused. Defaults to
	// DefaultConnMaxLifetime (30 minutes).
	ConnMaxLifetime time.Duration
	// Logger receives connection-loss retries and option warnings when a
	// Spec carries no logger of its own. Defaults to slog.Default().
	Logger *slog.Logger
	// ConnectTimeout bounds a new connection: its dial, TLS, handshake and
	// authentication together. Defaults to DefaultConnectTimeout (10 s);
	// a credential's own timeout parameter takes its place.
	ConnectTimeout time.Duration
}

// Driver is the MariaDB/MySQL cursor driver (go-sql-driver/mysql). It
// keeps one database/sql pool per credential; Open is cheap. Safe for
// concurrent use.
type Driver struct {
	cfg Config
	log *slog.Logger
	dbs *clientcache.Cache[*pool]
}

// pool is one credential's connections and what the driver learnt about
// their server.
type pool struct {
	db *sql.DB
	// noIdleTimeout is set once the server refused the idle transaction
	// timeout (MySQL has no such variable): claims stop setting it.
	noIdleTimeout atomic.Bool
}

var (
	_ cursor.Driver           = (*Driver)(nil)
	_ cursor.TemplateOptioner = (*Driver)(nil)
)

// New returns a driver. Pools are created lazily, by the first Open of
// each credential.
func New(cfg Config) *Driver {
	if cfg.MaxOpenConns <= 0 {
		cfg.MaxOpenConns = DefaultMaxOpenConns
	}
	if cfg.ConnMaxLifetime <= 0 {
		cfg.ConnMaxLifetime = DefaultConnMaxLifetime
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Driver{cfg: cfg, log: log, dbs: clientcache.New(func(p *pool) error { return p.db.Close() })}
}

// Features reports what the mysql driver guarantees: the same as the
// postgres driver, transactional claims included (on MySQL, which has no
// idle transaction timeout, a claimer that stalls with its connection
// open holds its claim until the connection closes). Attempts and
// dead-lettering depend on the claim returning an attempts column and on
// a dead_letter statement.
func (d *Driver) Features() cursor.Features {
	return cursor.Features{
		TransactionalClaim: true,
		BatchClaim:         true,
		DeadLetter:         true,
		ClaimTemplate:      true,
		Attempts:           true,
	}
}

// OptionKeys lists the options the driver reads (cursor.OptionKeyLister):
// the SQL cursor's and mark.
func (d *Driver) OptionKeys() []string { return append(sqlcursor.OptionKeys(), OptMark) }

// TemplateOptions names the options the driver renders itself per call
// (mark, ack, release, dead_letter); the engine passes them unrendered.
func (d *Driver) TemplateOptions() []string {
	return append(sqlcursor.TemplateOptions(), OptMark)
}

// Open returns a cursor over spec's claim (and mark) on the database that
// spec.Credential names (see ParseCredential).
func (d *Driver) Open(ctx context.Context, spec cursor.Spec) (cursor.Cursor, error) {
	fail := func(err error) error {
		return &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "open", Err: err}
	}
	p, err := d.pool(spec.Credential)
	if err != nil {
		return nil, fail(err)
	}
	log := spec.Logger
	if log == nil {
		log = d.log
	}
	opts := spec.Options
	var mark *dsl.Template
	if v, ok := opts[OptMark]; ok {
		mark, err = compileMark(v)
		if err != nil {
			return nil, fail(err)
		}
		// sqlcursor does not know the option; it must not warn about it.
		opts = maps.Clone(opts)
		delete(opts, OptMark)
		spec.Options = opts
	}
	so, err := sqlcursor.ParseOptions(opts, nil)
	if err != nil {
		return nil, fail(err)
	}
	exec := &executor{db: p.db, pool: p, log: log, mark: mark, key: so.Key, spec: spec, idle: idleTimeout(spec.Lease)}
	return sqlcursor.New(spec, exec, d.log)
}

func compileMark(v any) (*dsl.Template, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case *dsl.Template:
		return v, nil
	case string:
		if isBlank(v) {
			return nil, nil
		}
		t, err := dsl.CompileTemplate(v, dsl.Pos{})
		if err != nil {
			return nil, fmt.Errorf("option %q: %w", OptMark, err)
		}
		return t, nil
	default:
		return nil, fmt.Errorf("option %q is %T, want a SQL statement", OptMark, v)
	}
}

func isBlank(s string) bool {
	for _, r := range s {
		switch r {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return true
}

func (d *Driver) pool(credential string) (*pool, error) {
	return d.dbs.Get(credential, func() (*pool, error) { return d.openPool(credential) })
}

func (d *Driver) openPool(credential string) (*pool, error) {
	cfg, err := ParseCredential(credential)
	if err != nil {
		return nil, err
	}
	timeout := d.cfg.ConnectTimeout
	if cfg.Timeout > 0 {
		timeout = cfg.Timeout
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, errors.New("the credential is not a valid mysql data source name")
	}
	db := sql.OpenDB(boundedConnector{Connector: conn, timeout: timeout})
	db.SetMaxOpenConns(d.cfg.MaxOpenConns)
	db.SetMaxIdleConns(d.cfg.MaxOpenConns)
	db.SetConnMaxLifetime(d.cfg.ConnMaxLifetime)
	return &pool{db: db}, nil
}

// Close closes every pool. Cursors opened earlier fail afterwards.
func (d *Driver) Close() error { return d.dbs.Close() }

// DefaultConnectTimeout is Config.ConnectTimeout's default.
const DefaultConnectTimeout = 10 * time.Second

// boundedConnector bounds each new connection by timeout. go-sql-driver's
// own timeout parameter bounds the dial alone, and its handshake then
// waits on the caller's context: a server that accepts and never answers
// (a frozen process, a silent proxy) held a claim for as long as the
// loop lived.
type boundedConnector struct {
	driver.Connector
	timeout time.Duration
}

// Connect connects within c.timeout; running out of it is an error that
// wraps context.DeadlineExceeded (transient: cursor.Transient), saying so.
func (c boundedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn, err := c.Connector.Connect(cctx)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("no answer from the server within %s of connecting (a credential's timeout parameter sets this bound): %w", c.timeout, context.DeadlineExceeded)
	}
	return conn, err
}
