package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/internal/sqllog"
	"github.com/cursorflow/cursorflow/internal/pgretry"
)

// Defaults for Config fields left zero.
const (
	DefaultSchema       = "cursorflow"
	DefaultPollInterval = time.Second
)

// Config tunes a Log. The zero value is valid.
type Config struct {
	// Schema holds the log's tables; it is created if missing. Defaults to
	// DefaultSchema ("cursorflow").
	Schema string
	// PollInterval is how often a blocked Wait re-reads the execution in
	// case a notification was lost (the listening connection dropped).
	// Notifications normally wake it at once. Defaults to
	// DefaultPollInterval (1s).
	PollInterval time.Duration
	// NotifyInterval is how often, at most, the log notifies other
	// processes' waiters of its appends: at once when it has been idle,
	// then once per interval for every execution appended meanwhile, in
	// a statement apart from the appends (PostgreSQL serializes the
	// commits of transactions that notify). A waiter in another process
	// wakes at most this much later than it could; one in this process
	// at once. Defaults to DefaultNotifyInterval (10ms).
	NotifyInterval time.Duration
	// Logger receives the listener's connection problems and failed
	// notifications. Defaults to slog.Default().
	Logger *slog.Logger
	// MustExist refuses a schema that holds no log (an error wrapping
	// eventlog.ErrNoLog) instead of creating one: for a reader pointed
	// at a log that must be there already (a resume, a status). An
	// existing log is still migrated. Defaults to false.
	MustExist bool
	// OperationTimeout bounds each call on the log (an append, a read, a
	// listing, a snapshot), Wait aside, which waits as long as its
	// context lets it. A server or a network path that stops answering
	// (a frozen server, a connection a firewall or a failover left
	// black-holed) fails the call with an error wrapping
	// eventlog.ErrUnavailable that says so, where it held the call, and
	// everything waiting on it, for as long as the connection looked
	// alive; the engine takes such a failure as an outage and tries
	// again on a fresh connection. An append that fails so may still
	// have been stored; the engine's reload from the log sorts that out,
	// as for a reply lost with its connection. Defaults to
	// DefaultOperationTimeout (30s); negative: unbounded.
	OperationTimeout time.Duration
}

// DefaultOperationTimeout is Config.OperationTimeout's default: far above
// what an append or a read of a page takes a loaded server, well below
// what holding a run silently on a dead connection costs.
const DefaultOperationTimeout = 30 * time.Second

func (c Config) withDefaults() (Config, error) {
	if c.PollInterval < 0 {
		return c, errors.New("postgres eventlog: PollInterval must not be negative")
	}
	if c.NotifyInterval < 0 {
		return c, errors.New("postgres eventlog: NotifyInterval must not be negative")
	}
	if c.NotifyInterval == 0 {
		c.NotifyInterval = DefaultNotifyInterval
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.OperationTimeout == 0 {
		c.OperationTimeout = DefaultOperationTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Log is an eventlog.Log stored in PostgreSQL. It is safe for concurrent
// use by many goroutines and many processes sharing the schema.
type Log struct {
	cfg     Config
	pool    *pgxpool.Pool
	ownPool bool
	sql     statements
	channel string // LISTEN/NOTIFY channel; the payload is an execution id
	notify  *notifier
	// direct sends the lean statement's batches through
	// appendPlainDirect, prepared as plainName.
	direct    bool
	plainName string
	params    sync.Pool // of *directParams
	// untyped says that the pool's mode sends parameters without the
	// statement's types (exec, simple protocol): see textArray.
	untyped bool

	state     sqllog.State
	closeOnce sync.Once

	listenOnce   sync.Once
	listenCancel context.CancelFunc
	listenDone   chan struct{}
}

var _ eventlog.Log = (*Log)(nil)

// Open connects to the database at dsn (a postgres:// URL or key=value
// string), creates the schema and applies pending migrations. Close closes
// the connection pool.
//
// Unless dsn sets it, the pool's sessions use plan_cache_mode =
// force_generic_plan: the append statement's custom planning costs about
// as much as its execution, and its generic plan probes the indexes row by
// row whatever the statistics say. A host passing its own pool to New may
// set the same parameter.
func Open(ctx context.Context, dsn string, cfg Config) (*Log, error) {
	pcfg, err := ParsePoolConfig(dsn)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres eventlog: connect: %w", err)
	}
	l, err := New(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	l.ownPool = true
	return l, nil
}

// ParsePoolConfig parses dsn into the pool configuration Open uses:
// plan_cache_mode = force_generic_plan unless dsn sets it, and connecting
// gives up after 10 s unless dsn sets connect_timeout (or the environment
// PGCONNECT_TIMEOUT). A host that shares
// one pool between the log and its own queries (a leader lease, a playbook
// store) builds it from this; a pool from pgxpool.New(dsn) lacks both.
func ParsePoolConfig(dsn string) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres eventlog: %w", err)
	}
	pgretry.BoundConnect(&pcfg.ConnConfig.Config, dsn)
	if _, ok := pcfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok {
		pcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	return pcfg, nil
}

// New uses pool, creating the schema and applying pending migrations
// under an advisory lock. Close leaves the pool open. Wait opens one extra
// connection (outside the pool) to LISTEN on. A nil pool is an error.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Log, error) {
	if pool == nil {
		return nil, errors.New("postgres eventlog: New: nil pool (Open connects from a DSN)")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.MustExist {
		var found bool
		q := "SELECT to_regclass(" + quoteLiteral(pgx.Identifier{cfg.Schema, "events"}.Sanitize()) + ") IS NOT NULL"
		if err := pool.QueryRow(ctx, q).Scan(&found); err != nil {
			return nil, fmt.Errorf("postgres eventlog: look for schema %q: %w", cfg.Schema, err)
		}
		if !found {
			return nil, fmt.Errorf("%w: schema %q holds no log", eventlog.ErrNoLog, cfg.Schema)
		}
	}
	if err := migrate(ctx, pool, cfg.Schema); err != nil {
		return nil, fmt.Errorf("postgres eventlog: migrate schema %q: %w", cfg.Schema, err)
	}
	channel := cfg.Schema + ".events"
	if len(channel) > 63 { // NAMEDATALEN-1; a shared prefix only costs spurious wake-ups
		channel = channel[:63]
	}
	l := &Log{
		cfg:     cfg,
		pool:    pool,
		sql:     newStatements(pgx.Identifier{cfg.Schema}.Sanitize()),
		channel: channel,
		direct:  directMode(pool.Config().ConnConfig.DefaultQueryExecMode),
		untyped: untypedMode(pool.Config().ConnConfig.DefaultQueryExecMode),
	}
	l.plainName = plainStatementName(l.sql.appendPlain)
	l.notify = newNotifier(cfg.NotifyInterval, cfg.Logger, l.sendNotify)
	return l, nil
}

// Append implements eventlog.Log. The batch travels in one round trip and
// one transaction: the lean statement for a drain's usual batch (lock the
// executions row and reserve the seqs, insert), else a pipeline of two
// statements under one Sync (lock the executions rows; insert the
// non-duplicates with their seqs and update the executions rows). Other
// processes' waiters are notified once it has committed
// (Config.NotifyInterval). See the package documentation.
func (l *Log) Append(ctx context.Context, events []eventlog.Event) ([]eventlog.Result, error) {
	return l.append(ctx, events, nil)
}

// Pool returns the connection pool the log uses.
func (l *Log) Pool() *pgxpool.Pool { return l.pool }

// AppendGuard is a statement an append runs first, in its own transaction:
// one that raises an error refuses the append, and nothing of the batch is
// stored. A leader lease's check is one (engine/leader): checked where
// the events are written, a deposed leader can append nothing, however
// late its append arrives.
type AppendGuard struct {
	SQL  string
	Args []any
}

// Guarded is a view of a Log whose appends run its guard first; every
// other method is the Log's.
type Guarded struct {
	*Log
	guard AppendGuard
}

// WithAppendGuard returns a view of l whose Append runs g first, in the
// same round trip and transaction.
func (l *Log) WithAppendGuard(g AppendGuard) *Guarded { return &Guarded{Log: l, guard: g} }

// Append implements eventlog.Log: the guard, then the batch, atomically.
func (g *Guarded) Append(ctx context.Context, events []eventlog.Event) ([]eventlog.Result, error) {
	return g.append(ctx, events, &g.guard)
}

func (l *Log) append(ctx context.Context, events []eventlog.Event, guard *AppendGuard) ([]eventlog.Result, error) {
	return l.appendBatch(ctx, events, guard, true)
}

// appendGeneral appends with the general statement only.
func (l *Log) appendGeneral(ctx context.Context, events []eventlog.Event, guard *AppendGuard) ([]eventlog.Result, error) {
	return l.appendBatch(ctx, events, guard, false)
}

// appendBatch sends a batch in one round trip; with plainOK, a plain batch
// (plainIssued) of one execution goes through the lean statement.
func (l *Log) appendBatch(ctx context.Context, events []eventlog.Event, guard *AppendGuard, plainOK bool) ([]eventlog.Result, error) {
	if results, stop, err := l.state.CheckAppend(ctx, events); stop {
		return results, err
	}
	var plain bool
	var issued []string
	if plainOK && oneExecution(events) {
		issued, plain = plainIssued(events)
	}
	if plain {
		results, handled, err := l.appendPlainDirect(ctx, events[0].ExecutionID, events, issued, guard)
		if handled {
			return l.plainDone(ctx, events, guard, results, err)
		}
	}
	n := len(events)
	var (
		execIDs, types, steps, commands, loops = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		workers                                = make([]string, n)
		// Payloads and metas go as their bytes (text's binary form),
		// without a copy into strings; nil is NULL.
		payloads, metas  = make([][]byte, n), make([][]byte, n)
		frames, attempts = make([]int64, n), make([]int64, n)
		times            = make([]time.Time, n)
	)
	now := time.Now()
	for i, e := range events {
		execIDs[i], types[i], steps[i], commands[i], loops[i] = e.ExecutionID, e.Type, e.Step, e.CommandID, e.LoopID
		workers[i], payloads[i], metas[i] = e.WorkerID, nilIfEmpty(e.Payload), nilIfEmpty(e.Meta)
		frames[i], attempts[i] = int64(e.Frame), int64(e.Attempt)
		times[i] = e.Time
		if e.Time.IsZero() {
			times[i] = now
		}
	}
	distinct := slices.Clone(execIDs)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)

	b := &pgx.Batch{}
	if guard != nil {
		b.Queue(guard.SQL, guard.Args...)
	}
	if plain {
		b.Queue(l.sql.appendPlain, distinct[0], types, steps, commands, loops, frames, attempts, workers,
			l.textArray(payloads), l.textArray(metas), times,
			int64(n), issued)
	} else {
		b.Queue(l.sql.lock, distinct)
		b.Queue(l.sql.append, execIDs, types, steps, commands, loops, frames, attempts, workers,
			l.textArray(payloads), l.textArray(metas), times)
	}
	bctx, cancel := l.bound(ctx)
	defer cancel()
	br := l.pool.SendBatch(bctx, b)
	var results []eventlog.Result
	var err error
	if guard != nil {
		_, err = br.Exec()
	}
	if err == nil {
		results, err = readAppend(br, execIDs, plain)
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr // the commit happens at the Sync that Close waits for
	}
	if plain {
		return l.plainDone(ctx, events, guard, results, err)
	}
	var started *eventlog.AlreadyStartedError
	if errors.As(err, &started) {
		return nil, err // nothing stored; not an error of the database
	}
	if err != nil {
		return nil, l.opErr(ctx, "append", err)
	}
	l.appended(distinct...)
	return results, nil
}

// plainDone maps the lean statement's answer, sent directly or through
// pgx. A batch it stored nothing of (the execution has no events yet or
// has ended, or a command.issued of the batch is on record: a retried
// append) goes through the general statement, which sorts it out.
func (l *Log) plainDone(ctx context.Context, events []eventlog.Event, guard *AppendGuard, results []eventlog.Result, err error) ([]eventlog.Result, error) {
	if errors.Is(err, errPlainUnfit) || isIssuedDuplicate(err) {
		return l.appendGeneral(ctx, events, guard)
	}
	if err != nil {
		return nil, l.opErr(ctx, "append", err)
	}
	l.appended(events[0].ExecutionID)
	return results, nil
}

// appended wakes the waiters of ids, whose appends have committed: those
// in this process at once (they need not wait for the notification's
// round trip through the server), those of other processes through the
// notifier.
func (l *Log) appended(ids ...string) {
	for _, id := range ids {
		l.state.Notify(id)
	}
	l.notify.add(ids...)
}

// untypedMode reports whether pgx sends a statement's parameters in mode
// without knowing their types: it then types them by their Go type.
func untypedMode(mode pgx.QueryExecMode) bool {
	return mode == pgx.QueryExecModeExec || mode == pgx.QueryExecModeSimpleProtocol
}

// textArray is list (nil elements for NULL) as a parameter pgx sends as
// text[] in the pool's mode. Where pgx knows the statement's types it
// sends [][]byte as they are; where it types parameters by their Go type
// (untypedMode) [][]byte goes as bytea[], which the statement's ::text[]
// cast would store as bytea's hex output ("\x7b22..."): there the bytes
// go as strings.
func (l *Log) textArray(list [][]byte) any {
	if !l.untyped {
		return list
	}
	texts := make([]*string, len(list))
	for i, b := range list {
		if b != nil {
			s := string(b)
			texts[i] = &s
		}
	}
	return texts
}

// oneExecution reports whether every event of a non-empty batch is of
// the same execution.
func oneExecution(events []eventlog.Event) bool {
	for i := 1; i < len(events); i++ {
		if events[i].ExecutionID != events[0].ExecutionID {
			return false
		}
	}
	return len(events) > 0
}

// nilIfEmpty returns b, or nil (NULL) when it is empty.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// errPlainUnfit is readAppend's answer when the lean statement stored
// nothing: the execution has no events yet or has ended, or a
// command.issued of the batch is on record.
var errPlainUnfit = errors.New("postgres eventlog: plain append does not fit the execution")

// isIssuedDuplicate reports whether err is the lean statement's refusal
// of a command.issued on record: a violation of events_command_issued.
func isIssuedDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" /* unique_violation */ && pgErr.ConstraintName == "events_command_issued"
}

// plainIssued reports whether a batch can go through the lean statement
// (appendPlain): no event with a rule of its own (execution.started,
// loop.done, loop.fanin.completed, a terminal one) and no command_id
// issued twice in it (which the statement would take for one on record).
// It returns the command_ids of the batch's command.issued events.
func plainIssued(events []eventlog.Event) (issued []string, plain bool) {
	for _, e := range events {
		switch {
		case e.Type == eventlog.TypeExecutionStarted, e.Type == eventlog.TypeLoopDone,
			e.Type == eventlog.TypeLoopFaninCompleted, eventlog.IsTerminal(e.Type):
			return nil, false
		case e.Type == eventlog.TypeCommandIssued:
			issued = append(issued, e.CommandID)
		}
	}
	// Sorted, a repeat sits next to its twin, in a drain's batch of one
	// or two as in a fan-out's of thousands.
	sorted := slices.Sorted(slices.Values(issued))
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return nil, false
		}
	}
	return issued, true
}

// readAppend reads the results of a batch of the events of execIDs: the
// lean statement's (plain), or those of the lock and append statements.
// A second execution.started in it is an *eventlog.AlreadyStartedError:
// the append stored nothing.
func readAppend(br pgx.BatchResults, execIDs []string, plain bool) ([]eventlog.Result, error) {
	if plain {
		return readPlain(br, len(execIDs))
	}
	n := len(execIDs)
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	results := make([]eventlog.Result, 0, n)
	restarted := ""
	for rows.Next() {
		var dup, restart bool
		var id, seq *int64
		if err := rows.Scan(&dup, &restart, &id, &seq); err != nil {
			return nil, err
		}
		if restart && restarted == "" && len(results) < n {
			restarted = execIDs[len(results)]
		}
		if dup || id == nil || seq == nil {
			results = append(results, eventlog.Result{Duplicate: true})
			continue
		}
		results = append(results, eventlog.Result{ID: *id, Seq: *seq})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(results) != n {
		return nil, fmt.Errorf("append returned %d results for %d events", len(results), n)
	}
	if restarted != "" {
		return nil, &eventlog.AlreadyStartedError{ExecutionID: restarted}
	}
	return results, nil
}

// readPlain reads the lean statement's results for a batch of n events:
// every event stored, or errPlainUnfit when it stored none.
func readPlain(br pgx.BatchResults, n int) ([]eventlog.Result, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	results := make([]eventlog.Result, 0, n)
	for rows.Next() {
		var r eventlog.Result
		if err := rows.Scan(&r.ID, &r.Seq); err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return plainResults(results, n)
}

// plainResults checks the lean statement's answer for a batch of n
// events: all of them stored, or none (errPlainUnfit).
func plainResults(results []eventlog.Result, n int) ([]eventlog.Result, error) {
	switch len(results) {
	case n:
		return results, nil
	case 0:
		return nil, errPlainUnfit
	}
	return nil, fmt.Errorf("append returned %d results for %d events", len(results), n)
}

// opErr maps an error of an operation: ErrClosed once the log is closed,
// the context's error when it ended the operation.
func (l *Log) opErr(ctx context.Context, op string, err error) error {
	if ctx.Err() == nil && l.cfg.OperationTimeout > 0 && errors.Is(err, context.DeadlineExceeded) {
		// The caller's context is live: the deadline was bound's.
		err = fmt.Errorf("no answer within %s: %w", l.cfg.OperationTimeout, err)
	}
	return l.state.OpErr(ctx, "postgres", op, err)
}

// bound returns ctx bounded by Config.OperationTimeout, for one call's
// work on the server; errors are mapped with opErr against ctx itself.
func (l *Log) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.cfg.OperationTimeout < 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.cfg.OperationTimeout)
}

// readPage is how many events one statement of Read fetches at most: a
// long execution read whole (limit 0) comes in pages, each bounded by
// Config.OperationTimeout, so the bound says the server stopped
// answering, not that the execution is long.
const readPage = 5000

// Read implements eventlog.Log.
func (l *Log) Read(ctx context.Context, executionID string, afterSeq int64, limit int) ([]eventlog.Event, error) {
	if l.state.Closed() {
		return nil, eventlog.ErrClosed
	}
	var out []eventlog.Event
	for {
		n := readPage
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		page, err := l.readPage(ctx, out, executionID, afterSeq, n)
		if err != nil {
			return nil, err
		}
		got := len(page) - len(out)
		out = page
		if got < n || len(out) == limit {
			return out, nil
		}
		// Seqs are contiguous and only ever appended: the next page
		// starts after the last event read.
		afterSeq = out[len(out)-1].Seq
	}
}

// readPage appends to out the execution's events after afterSeq, at most
// limit of them, in one bounded statement (see reread).
func (l *Log) readPage(ctx context.Context, out []eventlog.Event, executionID string, afterSeq int64, limit int) ([]eventlog.Event, error) {
	start := len(out)
	err := l.reread(ctx, func(bctx context.Context) error {
		out = out[:start] // a second try reads the page again
		rows, err := l.pool.Query(bctx, l.sql.read, executionID, afterSeq, int64(limit))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e := eventlog.Event{ExecutionID: executionID}
			var frame, attempt int64
			var payload, meta []byte
			if err := rows.Scan(&e.ID, &e.Seq, &e.Type, &e.Step, &e.CommandID, &e.LoopID, &frame, &attempt,
				&e.WorkerID, &payload, &meta, &e.Time); err != nil {
				return err
			}
			e.Frame, e.Attempt, e.Payload, e.Meta, e.Time = int(frame), int(attempt), payload, meta, e.Time.UTC()
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, l.opErr(ctx, "read", err)
	}
	return out, nil
}

// reread runs a read, bounded by Config.OperationTimeout (bound), and
// runs it once more, bounded again, when it failed because the server
// dropped the session it ran on (a restart, a failover,
// pg_terminate_backend): the pool may still hold such sessions, idle, and
// a read repeats without harm. A pool the Log made is reset first, so the
// second try gets a new session (the other idle ones most likely died with
// the first); a host's pool is the host's to reset. A read that ran out of
// Config.OperationTimeout is not tried again: the bound is the call's.
func (l *Log) reread(ctx context.Context, read func(bctx context.Context) error) error {
	try := func() error {
		bctx, cancel := l.bound(ctx)
		defer cancel()
		return read(bctx)
	}
	err := try()
	if err == nil || ctx.Err() != nil || !pgretry.ConnectionLost(err) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return err
	}
	if l.ownPool {
		l.pool.Reset()
	}
	return try()
}

func (l *Log) lastSeq(ctx context.Context, executionID string) (int64, error) {
	var seq int64
	err := l.reread(ctx, func(bctx context.Context) error {
		return l.pool.QueryRow(bctx, l.sql.lastSeq, executionID).Scan(&seq)
	})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, l.opErr(ctx, "wait", err)
	}
	return seq, nil
}

// Wait implements eventlog.Log. A dedicated connection per Log LISTENs for
// appends from every process and wakes the waiters of the execution named
// in the notification; should it drop, waiters fall back to re-reading
// every Config.PollInterval until it is back.
func (l *Log) Wait(ctx context.Context, executionID string, afterSeq int64) error {
	l.listenOnce.Do(l.startListener)
	return l.state.Wait(ctx, executionID, afterSeq, l.cfg.PollInterval, l.lastSeq)
}

func (l *Log) startListener() {
	if l.state.Closed() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.listenCancel = cancel
	l.listenDone = make(chan struct{})
	go l.listen(ctx)
}

// listen keeps one LISTEN connection alive until ctx ends, reconnecting
// with backoff.
func (l *Log) listen(ctx context.Context) {
	defer close(l.listenDone)
	const minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	for {
		listened, err := l.listenConn(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = minBackoff
		}
		l.cfg.Logger.Warn("eventlog listener disconnected; waiters poll until it reconnects",
			"schema", l.cfg.Schema, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func (l *Log) listenConn(ctx context.Context) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig)
	if err != nil {
		return false, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return false, err
	}
	// Appends committed before LISTEN took effect sent no notification we
	// could hear: let every current waiter re-check.
	l.state.NotifyAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		l.state.Notify(n.Payload)
	}
}

// sendNotify notifies other processes' waiters of appends to ids, bounded
// by Config.OperationTimeout.
func (l *Log) sendNotify(ctx context.Context, ids []string) error {
	bctx, cancel := l.bound(ctx)
	defer cancel()
	_, err := l.pool.Exec(bctx, l.sql.notify, l.channel, ids)
	return err
}

// executionsPage is how many ids one statement of Executions fetches at
// most: like Read, a listing of a log of any size comes in pages, each
// bounded by Config.OperationTimeout.
var executionsPage = 5000

// Executions implements eventlog.Log.
func (l *Log) Executions(ctx context.Context, q eventlog.ExecutionsQuery) ([]string, error) {
	if l.state.Closed() {
		return nil, eventlog.ErrClosed
	}
	// The listing's position is a first_id: ids are appended in that
	// order and a first_id never changes, so a page continues exactly
	// where the last one ended, whatever is appended meanwhile.
	var from int64
	if q.NewestFirst {
		from = math.MaxInt64
	}
	if q.After != "" {
		var first *int64
		err := l.reread(ctx, func(bctx context.Context) error {
			return l.pool.QueryRow(bctx, l.sql.firstID, q.After).Scan(&first)
		})
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && first == nil) {
			return nil, nil // an execution this log does not hold
		}
		if err != nil {
			return nil, l.opErr(ctx, "executions", err)
		}
		from = *first
	}
	query := l.sql.executions[b2i(q.Unfinished)][b2i(q.NewestFirst)]
	var ids []string
	for {
		n := executionsPage
		if q.Limit > 0 {
			n = min(n, q.Limit-len(ids))
		}
		before := len(ids)
		var err error
		if ids, from, err = l.executionsPage(ctx, ids, query, from, n); err != nil {
			return nil, err
		}
		if len(ids)-before < n || len(ids) == q.Limit {
			return ids, nil
		}
	}
}

// executionsPage appends to ids at most limit ids after first_id from,
// in one bounded statement (see reread), and returns the first_id of the
// last.
func (l *Log) executionsPage(ctx context.Context, ids []string, query string, from int64, limit int) ([]string, int64, error) {
	start, last := len(ids), from
	err := l.reread(ctx, func(bctx context.Context) error {
		ids, last = ids[:start], from // a second try reads the page again
		rows, err := l.pool.Query(bctx, query, from, int64(limit))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id, &last); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, l.opErr(ctx, "executions", err)
	}
	return ids, last, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Close implements eventlog.Log: it stops the listener, wakes every Wait
// with eventlog.ErrClosed and, for a Log made by Open, closes the pool.
// Closing twice is a no-op.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.state.Close()
		// Stop a listener, or keep one from starting.
		l.listenOnce.Do(func() {})
		if l.listenCancel != nil {
			l.listenCancel()
			<-l.listenDone
		}
		// What is pending goes out before the pool closes.
		l.notify.close()
		if l.ownPool {
			l.pool.Close()
		}
	})
	return nil
}

// quoteLiteral quotes s as a SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
