package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/sqlcursor"
	"github.com/cursorflow/cursorflow/drivers/internal/clientcache"
	"github.com/cursorflow/cursorflow/internal/sqlquote"
)

// DefaultBusyTimeout is how long a statement waits for another process's
// write lock before failing with SQLITE_BUSY.
const DefaultBusyTimeout = 5 * time.Second

// Config configures a Driver.
type Config struct {
	// BusyTimeout is SQLite's busy_timeout: how long a claim waits for a
	// write lock held by another process. Defaults to DefaultBusyTimeout
	// (5 seconds).
	BusyTimeout time.Duration
	// Logger receives option warnings when a Spec carries no logger of its
	// own. Defaults to slog.Default().
	Logger *slog.Logger
}

// Driver is the SQLite cursor driver (modernc.org/sqlite, no cgo). It
// keeps one database handle per credential with a single connection, so
// claims, acks and releases of one process are serialized in-process
// rather than contending for SQLite's write lock. Safe for concurrent use.
type Driver struct {
	cfg Config
	log *slog.Logger
	dbs *clientcache.Cache[*sql.DB]
}

var (
	_ cursor.Driver           = (*Driver)(nil)
	_ cursor.TemplateOptioner = (*Driver)(nil)
)

// New returns a driver. Databases are opened lazily, by the first Open of
// each credential.
func New(cfg Config) *Driver {
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = DefaultBusyTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Driver{cfg: cfg, log: log, dbs: clientcache.New((*sql.DB).Close)}
}

// Features reports what the sqlite driver guarantees: the same as the
// postgres driver, transactional claims included. Attempts and dead-lettering depend on the claim
// returning an attempts column and on a dead_letter statement.
//
// Its claims are exclusive too (ExclusiveClaim): one that writes (marks
// its rows) takes SQLite's write lock, which one transaction at a time
// holds, so it waits for an open claim, or fails after BusyTimeout; one
// that only reads sees the committed rows, which another claim's
// uncommitted marks do not hide. A claim that finds nothing therefore
// proves that no claimer holds rows it has not recorded.
func (d *Driver) Features() cursor.Features {
	return cursor.Features{
		ExclusiveClaim:     true,
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

// Open returns a cursor over spec's claim on the database file that
// spec.Credential names: a path, sqlite:PATH, sqlite://PATH or a file: URI.
func (d *Driver) Open(ctx context.Context, spec cursor.Spec) (cursor.Cursor, error) {
	db, err := d.db(ctx, spec.Credential)
	if err != nil {
		return nil, &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "open", Err: err}
	}
	cur, err := sqlcursor.New(spec, executor{db: db}, d.log)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return cur, nil
}

func (d *Driver) db(ctx context.Context, credential string) (*sql.DB, error) {
	return d.dbs.Get(credential, func() (*sql.DB, error) { return d.openDB(ctx, credential) })
}

func (d *Driver) openDB(ctx context.Context, credential string) (*sql.DB, error) {
	dsn, err := DSN(credential, d.cfg.BusyTimeout)
	if err != nil {
		return nil, err
	}
	dsn = mustExist(dsn)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	// One connection: SQLite has one writer anyway, and a claim is a
	// write; queueing in database/sql is cheaper than SQLITE_BUSY retries.
	// Keeping it open also keeps a :memory: database alive.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	// Connect now: a database that does not exist (mode=rw refuses to
	// create it) is reported by its path, not as a claim's "no such
	// table".
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		if path, ok := filePath(dsn); ok {
			if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
				return nil, fmt.Errorf("database %s does not exist (a cursor's database is never created): %w", path, err)
			}
		}
		return nil, fmt.Errorf("open database: %w", err)
	}
	return db, nil
}

// mustExist adds mode=rw to a data source name from DSN that names a
// file and sets no mode: a mistyped path must fail, not leave a new empty
// database behind.
func mustExist(dsn string) string {
	path, rawQuery, _ := strings.Cut(dsn, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil || path == "file::memory:" || q.Get("mode") != "" {
		return dsn
	}
	q.Set("mode", "rw")
	return path + "?" + q.Encode()
}

// filePath returns the file a data source name from DSN opens, if it
// names one (not :memory:).
func filePath(dsn string) (string, bool) {
	p, rawQuery, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if q, err := url.ParseQuery(rawQuery); err == nil && q.Get("mode") == "memory" {
		return "", false
	}
	if rest, ok := strings.CutPrefix(p, "//"); ok {
		// file://host/path: SQLite takes an empty host or localhost.
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			p = rest[i:]
		}
	}
	p, err := url.PathUnescape(p)
	if err != nil || p == "" || p == ":memory:" {
		return "", false
	}
	return p, true
}

// DSN turns a credential into a modernc.org/sqlite data source name with
// WAL journaling, the busy timeout, and IMMEDIATE transactions (a claim
// takes the write lock when it begins, so two processes never both read
// the same candidates). Parameters already in a file: URI win. The
// driver's own connections add mode=rw (unless the URI sets a mode): a
// cursor's database must exist and is never created.
func DSN(credential string, busyTimeout time.Duration) (string, error) {
	c := strings.TrimSpace(credential)
	switch {
	case c == "":
		return "", errors.New("empty credential: want a database path, sqlite:PATH or a file: URI")
	case strings.HasPrefix(c, "sqlite://"):
		c = strings.TrimPrefix(c, "sqlite://")
	case strings.HasPrefix(c, "sqlite3://"):
		c = strings.TrimPrefix(c, "sqlite3://")
	case strings.HasPrefix(c, "sqlite:"):
		c = strings.TrimPrefix(c, "sqlite:")
	}
	var path, rawQuery string
	if strings.HasPrefix(c, "file:") {
		path, rawQuery, _ = strings.Cut(c, "?")
	} else {
		path = "file:" + escapePath(c)
	}
	if path == "file:" {
		return "", errors.New("credential names no database path")
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", errors.New("credential has a malformed query string")
	}
	setDefault := func(k, v string) {
		if q.Get(k) == "" {
			q.Set(k, v)
		}
	}
	if path != "file::memory:" && q.Get("mode") != "memory" {
		setDefault("_journal_mode", "WAL")
	}
	setDefault("_busy_timeout", strconv.FormatInt(busyTimeout.Milliseconds(), 10))
	setDefault("_txlock", "immediate")
	return path + "?" + q.Encode(), nil
}

// escapePath percent-encodes the characters a file: URI gives meaning to.
func escapePath(p string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return r.Replace(p)
}

// Close closes every database handle.
func (d *Driver) Close() error { return d.dbs.Close() }

// executor runs a cursor's SQL in IMMEDIATE transactions.
type executor struct{ db *sql.DB }

var _ sqlcursor.Executor = executor{}

// Claim runs the claim (args bound to its ? placeholders) in an IMMEDIATE
// transaction and leaves it open: it holds the driver's connection and
// SQLite's write lock until the claim is committed or aborted.
func (e executor) Claim(ctx context.Context, stmt string, args []any) (sqlcursor.Tx, sqlcursor.Result, error) {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, sqlcursor.Result{}, fmt.Errorf("begin: %w", err)
	}
	res, err := claimIn(ctx, tx, stmt, args)
	if err != nil {
		_ = tx.Rollback()
		return nil, sqlcursor.Result{}, err
	}
	return sqlcursor.DBTx(tx, claimIn), res, nil
}

// claimIn runs a claim in tx and reads its rows. A claim run again in the
// same transaction (after burying rows past max_attempts) keeps SQLite's
// write lock: no other writer comes between the rounds.
func claimIn(ctx context.Context, tx *sql.Tx, stmt string, args []any) (sqlcursor.Result, error) {
	rows, err := tx.QueryContext(ctx, stmt, args...)
	if err != nil {
		return sqlcursor.Result{}, err
	}
	return scan(rows)
}

// Dialect is SQLite's.
func (e executor) Dialect() string { return sqlquote.SQLite }

func scan(rows *sql.Rows) (sqlcursor.Result, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return sqlcursor.Result{}, err
	}
	res := sqlcursor.Result{Rows: [][]any{}}
	if len(cols) > 0 {
		res.Columns = cols
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return sqlcursor.Result{}, err
		}
		for i, v := range vals {
			vals[i] = sqlcursor.Normalize(v)
		}
		res.Rows = append(res.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return sqlcursor.Result{}, err
	}
	return res, nil
}

func (e executor) Exec(ctx context.Context, stmt string, args []any) error {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
