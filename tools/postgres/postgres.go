package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/internal/pgparam"
	"github.com/cursorflow/cursorflow/internal/pgretry"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/conv"
)

// DefaultMaxConns is the pool size per credential URL when neither Config
// nor the URL's pool_max_conns parameter sets one.
const DefaultMaxConns = 16

// DefaultPartialRows is how many rows of a statement's result go into one
// partial result (see Config.PartialRows).
const DefaultPartialRows = 100

// ErrBadConfig is wrapped by the errors Execute returns for a task that
// names no credential or no SQL.
var ErrBadConfig = errors.New("postgres: bad task configuration")

// ErrClosed is returned by Execute after Close.
var ErrClosed = errors.New("postgres: tool closed")

// Config configures the postgres tool.
type Config struct {
	// MaxConns caps each pool's connections. Defaults to the URL's
	// pool_max_conns parameter, else DefaultMaxConns.
	MaxConns int32
	// Keychain resolves aliases when a Call carries no Keychain. Optional.
	Keychain tools.Keychain
	// Logger receives pool lifecycle lines. Defaults to slog.Default().
	Logger *slog.Logger
	// ConfigurePool, when set, adjusts each pool's configuration before
	// the pool is created (tracing, AfterConnect hooks, ...).
	ConfigurePool func(alias string, cfg *pgxpool.Config) error
	// PartialRows is how many rows of a statement's result are handed on
	// as one partial result while the statement's rows arrive (for a call
	// with a Partial receiver): {statement, rows, rows_read}. Defaults to
	// DefaultPartialRows (100).
	PartialRows int
}

// Tool is the postgres tool: one lazily created pgxpool per credential
// URL, shared by every call. It is safe for concurrent use; Close releases
// the pools.
type Tool struct {
	cfg Config

	mu     sync.RWMutex
	pools  map[string]*pgxpool.Pool
	closed bool
}

// New returns the postgres tool.
func New(cfg Config) *Tool {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PartialRows <= 0 {
		cfg.PartialRows = DefaultPartialRows
	}
	return &Tool{cfg: cfg, pools: make(map[string]*pgxpool.Pool)}
}

// Close closes every pool. Calls made after Close fail with ErrClosed.
func (t *Tool) Close() error {
	t.mu.Lock()
	pools := t.pools
	t.pools = nil
	t.closed = true
	t.mu.Unlock()
	for _, p := range pools {
		p.Close()
	}
	return nil
}

// ConfigKeys implements tools.ConfigKeyLister: the keys of the package doc,
// aliases included.
func (t *Tool) ConfigKeys() []string {
	return []string{"auth", "credential", "credentials", "command", "query", "sql", "params"}
}

// ConfigSynonyms implements tools.ConfigSynonymLister.
func (t *Tool) ConfigSynonyms() [][]string {
	return [][]string{tools.AliasKeys(), {"command", "query", "sql"}}
}

// Execute runs the task's SQL. See the package documentation for the
// configuration and the Output.
func (t *Tool) Execute(ctx context.Context, call *tools.Call) (tools.Output, error) {
	alias, ok := conv.Alias(call.Config)
	if !ok {
		return tools.Output{}, fmt.Errorf("%w: auth (or credential) naming a keychain alias is required", ErrBadConfig)
	}
	sql, ok := conv.String(call.Config, "command", "query", "sql")
	if !ok || strings.TrimSpace(sql) == "" {
		return tools.Output{}, fmt.Errorf("%w: command (or query, sql) is required", ErrBadConfig)
	}
	kc := call.Keychain
	if kc == nil {
		kc = t.cfg.Keychain
	}
	if kc == nil {
		return tools.Output{}, fmt.Errorf("postgres: credential %q: no keychain configured: %w", alias, tools.ErrCredentialNotFound)
	}
	cred, err := kc.Resolve(ctx, alias)
	if err != nil {
		return tools.Output{}, fmt.Errorf("postgres: %w", err)
	}
	if cred.Alias == "" {
		cred.Alias = alias
	}
	var (
		values []any
		params [][]byte
	)
	if v, ok := call.Config["params"]; ok && v != nil {
		if values, params, err = bindParams(v); err != nil {
			return tools.Output{}, fmt.Errorf("%w: params: %w", ErrBadConfig, err)
		}
		if params == nil {
			params = [][]byte{}
		}
	}
	pool, err := t.pool(cred)
	if err != nil {
		return tools.Output{}, err
	}
	return t.run(ctx, pool, cred, sql, values, params, t.partials(call)), nil
}

// bindParams returns the params list (values of $1, $2, ...) and its
// values encoded as text.
func bindParams(v any) ([]any, [][]byte, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("want a list (values of $1, $2, ...), got %T", v)
	}
	params, err := pgparam.Encode(list)
	return list, params, err
}

// pool returns the pool for cred.URL, creating it on first use.
func (t *Tool) pool(cred tools.Credential) (*pgxpool.Pool, error) {
	t.mu.RLock()
	p, ok := t.pools[cred.URL]
	closed := t.closed
	t.mu.RUnlock()
	if ok {
		return p, nil
	}
	if closed {
		return nil, ErrClosed
	}

	pc, err := pgxpool.ParseConfig(cred.URL)
	if err != nil {
		// pgx quotes the connection string in parse errors.
		return nil, fmt.Errorf("postgres: credential %q: invalid connection URL: %s", cred.Alias, tools.Redact(err.Error(), cred))
	}
	pgretry.BoundConnect(&pc.ConnConfig.Config, cred.URL)
	if !strings.Contains(cred.URL, "pool_max_conns") {
		pc.MaxConns = DefaultMaxConns
	}
	if t.cfg.MaxConns > 0 {
		pc.MaxConns = t.cfg.MaxConns
	}
	if t.cfg.ConfigurePool != nil {
		if err := t.cfg.ConfigurePool(cred.Alias, pc); err != nil {
			return nil, fmt.Errorf("postgres: credential %q: configure pool: %w", cred.Alias, err)
		}
	}
	if _, set := pc.ConnConfig.RuntimeParams["client_connection_check_interval"]; !set {
		host := pc.AfterConnect
		pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			if host != nil {
				if err := host(ctx, c); err != nil {
					return err
				}
			}
			return checkClientConnection(ctx, c.PgConn(), t.cfg.Logger)
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	if p, ok := t.pools[cred.URL]; ok {
		return p, nil
	}
	// NewWithConfig does not connect: the first Acquire does, so an
	// unreachable server surfaces as an error Output a policy can retry.
	p, err = pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: credential %q: create pool: %s", cred.Alias, tools.Redact(err.Error(), cred))
	}
	t.pools[cred.URL] = p
	t.cfg.Logger.Debug("postgres pool created", "credential", cred.Alias, "max_conns", pc.MaxConns)
	return p, nil
}

// ClientCheckInterval is the client_connection_check_interval the tool
// sets on its connections to a PostgreSQL 14 or later server (unless the
// URL sets one). PostgreSQL otherwise notices that a client is gone only
// when it next writes to it: a statement of a process that was killed
// (SIGKILL, OOM, a lost machine) runs on to its end, an hour for a body
// that hangs, holding its transaction's row locks, so the execution's
// resume blocks on them (the rows' next run, their ack, their release)
// and leaves the rows claimed. With the check the server ends such a
// statement within this interval, rolling it back.
const ClientCheckInterval = time.Second

// checkClientConnection sets ClientCheckInterval on conn when its server
// has the setting: PostgreSQL 14 or later by the server_version it
// reported at startup (older servers refuse the name). A server that
// refuses the statement (one that speaks the protocol without the
// setting, a pooler that forbids SET) keeps the connection as it is: the
// check is a safeguard, not a reason to fail the body.
func checkClientConnection(ctx context.Context, conn *pgconn.PgConn, log *slog.Logger) error {
	if serverMajor(conn) < 14 {
		return nil
	}
	sql := fmt.Sprintf("SET client_connection_check_interval = %d", ClientCheckInterval.Milliseconds())
	if err := conn.Exec(ctx, sql).Close(); err != nil {
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
			log.Debug("postgres: the server refused client_connection_check_interval; a killed process's statement runs to its end there",
				"server_version", conn.ParameterStatus("server_version"), "error", pgErr.Message)
			return nil
		}
		return fmt.Errorf("postgres: set client_connection_check_interval: %w", err)
	}
	return nil
}

// serverMajor is the major version of conn's server by the server_version
// it reported at startup; 0 when it reported none that reads as one.
func serverMajor(conn *pgconn.PgConn) int {
	v := conn.ParameterStatus("server_version")
	if end := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
		v = v[:end]
	}
	major, _ := strconv.Atoi(v)
	return major
}

// run executes sql, over the simple query protocol without params and
// as one statement of the extended protocol with them (params non-nil),
// hands its rows on as partial results (part, if set) and builds the
// Output.
//
// A statement that fails because the server dropped the connection (a
// restart, a failover, pg_terminate_backend: the pool's idle connections
// die with it) runs once more on a fresh connection, unless rows were
// handed on already. The server rolled the failed statement back, so the
// retry runs it at least once, as every row body is run.
func (t *Tool) run(ctx context.Context, pool *pgxpool.Pool, cred tools.Credential, sql string, values []any, params [][]byte, part *partials) tools.Output {
	for attempt := 0; ; attempt++ {
		out, lost := t.runOnce(ctx, pool, cred, sql, values, params, part)
		if !lost || attempt > 0 || ctx.Err() != nil || (part != nil && part.stmt > 0) {
			markTimeout(ctx, &out)
			return out
		}
		// The other idle connections most likely died with this one.
		pool.Reset()
		t.cfg.Logger.Warn("postgres: connection lost; running the statement again on a fresh connection",
			"credential", cred.Alias, "error", out.Error)
	}
}

// runOnce runs sql on one pooled connection (see run); lost reports that
// it failed because the connection was lost.
func (t *Tool) runOnce(ctx context.Context, pool *pgxpool.Pool, cred tools.Credential, sql string, values []any, params [][]byte, part *partials) (out tools.Output, lost bool) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return connError(cred, err), false
	}
	defer conn.Release()
	fail := func(err error) (tools.Output, bool) {
		return execError(cred, err), conn.Conn().IsClosed() && pgretry.ConnectionLost(err)
	}

	var (
		res      = result{part: part}
		affected int64
		rowsSeen bool
	)
	read := func(rr *pgconn.ResultReader) error {
		fds := rr.FieldDescriptions()
		if len(fds) == 0 {
			tag, err := rr.Close()
			affected = tag.RowsAffected()
			return err
		}
		// A statement that returns rows (even none) replaces the result:
		// the last such statement is the one reported.
		rowsSeen = true
		res.reset(fds)
		for rr.NextRow() {
			res.add(rr.Values())
		}
		res.flush()
		_, err := rr.Close()
		return err
	}
	if params != nil {
		// A list the statement types as an array goes as one.
		if err := pgparam.Typed(ctx, conn.Conn().PgConn(), conn.Conn().TypeMap(), sql, values, params); err != nil {
			return fail(err)
		}
		// Text in, text out: results decode exactly as without params.
		if err := read(conn.Conn().PgConn().ExecParams(ctx, sql, params, nil, nil, nil)); err != nil {
			return fail(err)
		}
	} else {
		mrr := conn.Conn().PgConn().Exec(ctx, sql)
		for mrr.NextResult() {
			_ = read(mrr.ResultReader()) // the error is mrr.Close's too
		}
		if err := mrr.Close(); err != nil {
			return fail(err)
		}
	}
	if !rowsSeen {
		return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{
			"columns": []any{}, "rows": []any{}, "row_count": affected,
		}}, false
	}
	return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{
		"columns": res.columns, "rows": res.rows, "row_count": int64(len(res.rows)),
	}}, false
}

// result accumulates the rows of one statement.
type result struct {
	columns []any
	names   []string
	oids    []uint32
	rows    []any
	// part hands rows on as partial results while they arrive; nil when
	// the call has no Partial receiver.
	part *partials
	// sent counts the rows handed on.
	sent int
}

// partials batches a call's rows into partial results.
type partials struct {
	call  *tools.Call
	every int
	stmt  int // statements that returned rows so far
}

func (t *Tool) partials(call *tools.Call) *partials {
	if call.Partial == nil {
		return nil
	}
	return &partials{call: call, every: t.cfg.PartialRows}
}

// flush hands on the rows not handed on yet.
func (r *result) flush() {
	if r.part == nil || r.sent == len(r.rows) {
		return
	}
	r.part.call.EmitPartial(map[string]any{
		"statement": r.part.stmt, "rows": r.rows[r.sent:len(r.rows):len(r.rows)], "rows_read": int64(len(r.rows)),
	})
	r.sent = len(r.rows)
}

func (r *result) reset(fds []pgconn.FieldDescription) {
	// pgconn reuses fds between statements: copy what is kept.
	r.columns = make([]any, len(fds))
	r.names = make([]string, len(fds))
	r.oids = make([]uint32, len(fds))
	for i, fd := range fds {
		r.columns[i] = fd.Name
		r.names[i] = fd.Name
		r.oids[i] = fd.DataTypeOID
	}
	r.rows = []any{}
	r.sent = 0
	if r.part != nil {
		r.part.stmt++
	}
}

func (r *result) add(values [][]byte) {
	row := make(map[string]any, len(values))
	for i, raw := range values {
		if i < len(r.names) {
			row[r.names[i]] = decode(r.oids[i], raw)
		}
	}
	r.rows = append(r.rows, row)
	if r.part != nil && len(r.rows)-r.sent >= r.part.every {
		r.flush()
	}
}

// retryableStates are SQLSTATEs (or classes) worth a retry.
func retryable(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), // connection exception
		code == "40001", code == "40P01", // serialization failure, deadlock
		code == "53300",                                   // too many connections
		code == "57P01", code == "57P02", code == "57P03": // shutdown, cannot connect now
		return true
	}
	return false
}

// markTimeout flags a failed statement that ran out of time with
// data.timeout, which policy rules see as output.error.kind "timeout":
// the step's spec.timeout passed (the statement was cancelled for it), or
// the server gave up on it for its own statement_timeout or lock_timeout
// (SQLSTATE 57014 or 55P03; the same states also mean a cancel by request
// or a NOWAIT lock refused, which only the message tells apart).
func markTimeout(ctx context.Context, out *tools.Output) {
	data, ok := out.Data.(map[string]any)
	if out.Status != tools.StatusError || !ok {
		return
	}
	code, _ := data["sqlstate"].(string)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		(code == "57014" || code == "55P03") && strings.Contains(out.Error, "timeout") {
		data["timeout"] = true
	}
}

// execError reports a failed statement: a server error verbatim
// ("ERROR: msg (SQLSTATE xxx)"), anything else as a connection problem.
func execError(cred tools.Credential, err error) tools.Output {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg := pgErr.Error()
		if pgErr.Detail != "" {
			msg += " DETAIL: " + pgErr.Detail
		}
		return tools.Output{
			Status: tools.StatusError,
			Error:  tools.Redact(msg, cred),
			Data:   map[string]any{"sqlstate": pgErr.Code, "retryable": retryable(pgErr.Code)},
		}
	}
	return connError(cred, err)
}

// connError reports a failure to reach or keep the server, naming the
// alias and never the URL.
func connError(cred tools.Credential, err error) tools.Output {
	data := map[string]any{"retryable": true}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		data["sqlstate"] = pgErr.Code
		data["retryable"] = retryable(pgErr.Code)
	}
	return tools.Output{
		Status: tools.StatusError,
		Error:  fmt.Sprintf("postgres: credential %q: %s", cred.Alias, tools.Redact(err.Error(), cred)),
		Data:   data,
	}
}
