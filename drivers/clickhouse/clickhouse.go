package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/internal/clientcache"
)

// Defaults of Config and of a cursor's lease.
const (
	// DefaultMaxConns is the default size of each connection pool.
	DefaultMaxConns = 8
	// DefaultLease is the lease taken when Spec.Lease is zero.
	DefaultLease = time.Minute
	// DefaultMaxRounds bounds how often one Claim retries after every
	// candidate was contested by another claimer.
	DefaultMaxRounds = 20
)

// Config configures a Driver.
type Config struct {
	// MaxConns caps each pool; the driver keeps one pool per credential.
	// Defaults to DefaultMaxConns (8).
	MaxConns int
	// MaxRounds bounds the claim rounds of one Claim whose candidates were
	// all contested (each round picks new candidates after a short random
	// pause). Defaults to DefaultMaxRounds (20).
	MaxRounds int
	// Logger receives retries, option warnings and dead-letter reasons
	// when a Spec carries no logger of its own. Defaults to slog.Default().
	Logger *slog.Logger
}

// Driver is the ClickHouse cursor driver (clickhouse-go v2, native
// protocol). It keeps one connection pool per DSN; of those no statement
// is using, it keeps the 16 most recently used and closes the others (a
// url option may name a server per execution). Safe for concurrent use.
type Driver struct {
	cfg   Config
	log   *slog.Logger
	conns *clientcache.Cache[driver.Conn]
	mu    sync.Mutex
	ready map[string]bool // credential + tables whose bookkeeping tables exist
	// claimInserted, if set (by tests, before the first Open), is called
	// with a claim's token after its claims were inserted and before they
	// are read back: the point at which other claimers' records change
	// what the read-back sees.
	claimInserted func(tok string)
}

var _ cursor.Driver = (*Driver)(nil)

// New returns a driver. Connections are opened lazily, by the first Open
// of each credential.
func New(cfg Config) *Driver {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = DefaultMaxRounds
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Driver{cfg: cfg, log: log, conns: clientcache.New(driver.Conn.Close), ready: make(map[string]bool)}
}

// OptionKeys lists the options the driver reads (cursor.OptionKeyLister).
func (d *Driver) OptionKeys() []string { return slices.Sorted(maps.Keys(knownOpts)) }

// Features reports what the driver guarantees. Claims are merge-based
// (no locks) and expire on their own; completion is recorded by Ack;
// stale tokens are refused; delivery counts come from the claims table.
// An optional claim template is the source query, rendered per claim.
// Rows are not claimed in source order.
func (d *Driver) Features() cursor.Features {
	return cursor.Features{
		BatchClaim:    true,
		LeaseExpiry:   true,
		NeedsAck:      true,
		DeadLetter:    true,
		Fencing:       true,
		Attempts:      true,
		ClaimTemplate: true,
	}
}

// Open returns a cursor over the table of spec.Options on the server that
// spec.Credential (a clickhouse:// DSN) names, creating the claims, done
// and dead tables when absent.
func (d *Driver) Open(ctx context.Context, spec cursor.Spec) (cursor.Cursor, error) {
	fail := func(err error) error {
		return &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "open", Err: err}
	}
	log := spec.Logger
	if log == nil {
		log = d.log
	}
	opts, err := ParseOptions(spec.Options, log)
	if err != nil {
		return nil, fail(err)
	}
	names, _ := opts.quoted() // validated by ParseOptions
	if spec.Claim == nil && opts.Table == "" {
		return nil, fail(fmt.Errorf("%w %s: required without a claim", ErrOption, OptTable))
	}
	cred := spec.Credential
	if cred == "" {
		if u, ok := spec.Options[OptURL].(string); ok {
			cred = u
		}
	}
	c := &Cursor{
		drv:   d,
		cred:  cred,
		spec:  spec,
		opts:  opts,
		t:     names,
		lease: spec.Lease,
		log:   log.With("cursor", spec.Kind, "auth", spec.Auth, "loop_id", spec.LoopID, "slot", spec.SlotID),
	}
	if c.lease <= 0 {
		c.lease = DefaultLease
	}
	if err := d.ensureTables(ctx, c); err != nil {
		return nil, fail(err)
	}
	return c, nil
}

// conn returns the pool for credential (a DSN: the auth alias's, or the
// url option's) and the release to call once the statement is done with
// it. A url option may name a server per execution, so the pools no
// statement holds are closed past clientcache.MaxIdle of them.
func (d *Driver) conn(credential string) (driver.Conn, func(), error) {
	return d.conns.Acquire(credential, func() (driver.Conn, error) { return d.dial(credential) })
}

func (d *Driver) dial(credential string) (driver.Conn, error) {
	if credential == "" {
		return nil, errors.New("no credential: give the cursor an auth credential or a url option")
	}
	opts, err := ch.ParseDSN(credential)
	if err != nil {
		// The parse error may quote the DSN, password and all.
		return nil, errors.New("the credential is not a valid clickhouse:// DSN")
	}
	opts.MaxOpenConns = d.cfg.MaxConns
	opts.MaxIdleConns = d.cfg.MaxConns
	c, err := ch.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c, nil
}

// dropConn forgets a credential's pool after a connection failure, so
// that the retry dials afresh.
func (d *Driver) dropConn(credential string, c driver.Conn) {
	d.conns.Forget(credential, c)
	_ = c.Close()
}

// ensureTables creates the claims, done and dead tables once per
// credential and table set.
func (d *Driver) ensureTables(ctx context.Context, c *Cursor) error {
	id := c.cred + "\x00" + c.t.claims + c.t.done + c.t.dead
	d.mu.Lock()
	ok := d.ready[id]
	d.mu.Unlock()
	if ok {
		return nil
	}
	for _, stmt := range []string{
		`CREATE TABLE IF NOT EXISTS ` + c.t.claims + ` (key String, token String, kind String, expires UInt64, at UInt64)
		 ENGINE = ReplacingMergeTree ORDER BY (key, token, kind)`,
		`CREATE TABLE IF NOT EXISTS ` + c.t.done + ` (key String, token String, at UInt64)
		 ENGINE = ReplacingMergeTree ORDER BY (key, token)`,
		`CREATE TABLE IF NOT EXISTS ` + c.t.dead + ` (key String, token String, reason String, at UInt64)
		 ENGINE = ReplacingMergeTree ORDER BY (key, token)`,
	} {
		if err := c.exec(ctx, stmt); err != nil {
			return fmt.Errorf("create bookkeeping table: %w", err)
		}
	}
	d.mu.Lock()
	d.ready[id] = true
	d.mu.Unlock()
	return nil
}

// Close closes every pool. Cursors opened earlier fail afterwards.
func (d *Driver) Close() error { return d.conns.Close() }

// connLost reports errors after which a statement is retried once on a
// fresh connection: the server or the network dropped the connection.
func connLost(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne *net.OpError
	if errors.As(err, &ne) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") || strings.Contains(msg, "EOF")
}
