package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/internal/sqllog"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Defaults for Config fields left zero.
const (
	DefaultBusyTimeout  = 5 * time.Second
	DefaultReadConns    = 4
	DefaultPollInterval = 250 * time.Millisecond
)

// Config tunes a Log. The zero value is valid.
type Config struct {
	// BusyTimeout is how long a statement waits for a lock held by another
	// process (or another Log on the same file) before failing with
	// SQLITE_BUSY. Defaults to DefaultBusyTimeout (5s).
	BusyTimeout time.Duration
	// ReadConns is the number of connections serving Read, Wait and
	// Executions. Defaults to DefaultReadConns (4).
	ReadConns int
	// PollInterval is how often a blocked Wait re-reads the database to
	// notice appends made by other processes. Appends through this Log wake
	// waiters at once, without polling. Defaults to DefaultPollInterval
	// (250ms).
	PollInterval time.Duration
	// Synchronous is SQLite's synchronous setting for the log's commits:
	// SyncFull (the default) flushes each append's WAL to the disk before
	// the append returns, so what the log acknowledged survives a power
	// loss or an operating system crash. The engine relies on that: a
	// claim commits in its source once its rows are on record, and a
	// record lost after the commit leaves the rows claimed with nothing
	// to say so. SyncNormal flushes only at checkpoints (every few
	// megabytes of events): a frame drain ran about 2% faster where it
	// was measured (a drain running a command per row, within the noise),
	// and a crash of the machine (not of the process) may undo the
	// appends since the last checkpoint. The value is case-insensitive;
	// any other is refused by Open.
	Synchronous string
	// ReadOnly opens an existing log for reading only, as a reader that
	// must not write (cursorflow status and events) wants: Open neither
	// migrates the schema nor recovers or checkpoints the WAL, so it
	// works on a full disk or a read-only file system, where opening for
	// writing fails. Append and SaveSnapshot then return an error
	// wrapping ErrReadOnly; Synchronous is ignored. A log no process
	// holds open whose -shm file cannot be created or sized is read in
	// SQLite's immutable mode when its WAL is empty (every commit is in
	// the main file then); such a Log reads the file as it was when
	// opened, and sees no later append (a resume once space is freed).
	// Otherwise Open fails with an error naming the file. Defaults to
	// false.
	ReadOnly bool
}

// ErrReadOnly is wrapped by the error of a write (Append, SaveSnapshot)
// to a Log opened with Config.ReadOnly.
var ErrReadOnly = errors.New("sqlite eventlog: log opened read-only")

// The values of Config.Synchronous.
const (
	SyncFull   = "FULL"
	SyncNormal = "NORMAL"
)

func (c Config) withDefaults() (Config, error) {
	if c.BusyTimeout < 0 || c.ReadConns < 0 || c.PollInterval < 0 {
		return c, errors.New("sqlite eventlog: BusyTimeout, ReadConns and PollInterval must not be negative")
	}
	switch strings.ToUpper(c.Synchronous) {
	case "", SyncFull:
		c.Synchronous = SyncFull
	case SyncNormal:
		c.Synchronous = SyncNormal
	default:
		return c, fmt.Errorf("sqlite eventlog: Synchronous %q: want %s or %s", c.Synchronous, SyncFull, SyncNormal)
	}
	if c.BusyTimeout == 0 {
		c.BusyTimeout = DefaultBusyTimeout
	}
	if c.ReadConns == 0 {
		c.ReadConns = DefaultReadConns
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	return c, nil
}

// Log is an eventlog.Log stored in one SQLite file. It is safe for
// concurrent use; several Log values (in one or many processes) may share
// a file.
type Log struct {
	cfg  Config
	path string // the file, named in append errors
	// readOnly: opened with Config.ReadOnly; writeDB is nil.
	readOnly bool
	writeDB  *sql.DB // one connection: appends are serialized in-process
	readDB   *sql.DB

	// slot is the single writer slot; whoever holds it owns w.
	slot chan struct{}
	w    *writer

	state     sqllog.State
	closeOnce sync.Once
	closeErr  error
}

// writer is the write connection with its prepared statements.
type writer struct {
	conn                                *sql.Conn
	insert, execState, upsert, hasStart *sql.Stmt
	// begin and commit open and close an append's transaction: prepared
	// once, not parsed again on every append.
	begin, commit *sql.Stmt
}

var _ eventlog.Log = (*Log)(nil)

// Open opens (creating if needed) the event log in the SQLite file at
// path, in WAL mode with synchronous=FULL (see Config.Synchronous), and
// applies the pending schema migrations. path must name a file (not
// ":memory:"; use eventlog.NewMemory for a log that lives in memory) and
// must not contain '?'.
func Open(ctx context.Context, path string, cfg Config) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") || strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlite eventlog: invalid path %q: want a plain file path", path)
	}
	busy := fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds())
	if cfg.ReadOnly {
		return openReadOnly(ctx, path, cfg, busy)
	}
	writeDSN := path + "?" + url.Values{"_pragma": {busy, "journal_mode(WAL)", "synchronous(" + cfg.Synchronous + ")"}}.Encode()
	readDSN := path + "?" + url.Values{"_pragma": {busy, "query_only(1)"}}.Encode()

	l := &Log{cfg: cfg, path: path, slot: make(chan struct{}, 1)}
	if l.writeDB, err = sql.Open("sqlite", writeDSN); err != nil {
		return nil, fmt.Errorf("sqlite eventlog: open %s: %w", path, err)
	}
	l.writeDB.SetMaxOpenConns(1)
	l.writeDB.SetMaxIdleConns(1)
	l.writeDB.SetConnMaxLifetime(0)
	l.writeDB.SetConnMaxIdleTime(0)

	w, err := l.connect(ctx, true)
	if err != nil {
		_ = l.writeDB.Close()
		return nil, err
	}
	l.w = w
	if l.readDB, err = sql.Open("sqlite", readDSN); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("sqlite eventlog: open %s: %w", path, err)
	}
	l.readDB.SetMaxOpenConns(cfg.ReadConns)
	l.readDB.SetMaxIdleConns(cfg.ReadConns)
	if err := l.readDB.PingContext(ctx); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("sqlite eventlog: open %s: %w", path, err)
	}
	return l, nil
}

// openReadOnly opens the log at path for reading only (Config.ReadOnly).
//
// mode=ro never writes the database, but SQLite still needs the WAL's
// shared-memory (-shm) file to read a WAL database, and creates it when
// no process holds the log open: on a full disk sizing it fails
// (SQLITE_IOERR_SHMSIZE), on a read-only file system creating it does.
// When that fails and the WAL is empty or gone, which it is once the
// last process closed the log cleanly, every commit is in the main file:
// the log is then read with immutable=1, which needs no -shm, no -wal and
// no lock. A WAL with commits in it (a writer that crashed, or one still
// running without its -shm) cannot be read that way, and Open says so.
func openReadOnly(ctx context.Context, path string, cfg Config, busy string) (*Log, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", eventlog.ErrNoLog, err)
		}
		return nil, fmt.Errorf("sqlite eventlog: open %s read-only: %w", path, err)
	}
	l := &Log{cfg: cfg, path: path, readOnly: true, slot: make(chan struct{}, 1)}
	uri := "file:" + (&url.URL{Path: path}).EscapedPath() + "?"
	params := url.Values{"mode": {"ro"}, "_pragma": {busy, "query_only(1)"}}
	db, err := l.openReader(ctx, uri+params.Encode())
	if err != nil && walEmpty(path) {
		params.Set("immutable", "1")
		db, err = l.openReader(ctx, uri+params.Encode())
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite eventlog: open %s read-only: %w%s", path, err, l.shmHint(err))
	}
	l.readDB = db
	return l, nil
}

// openReader opens dsn and checks that it holds a log of this build's
// schema, which a reader cannot migrate.
func (l *Log) openReader(ctx context.Context, dsn string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(l.cfg.ReadConns)
	db.SetMaxIdleConns(l.cfg.ReadConns)
	ms, err := sqllog.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	var version sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&version); err != nil {
		_ = db.Close()
		if strings.Contains(err.Error(), "no such table") {
			return nil, fmt.Errorf("%w: no event log in this file: %w", eventlog.ErrNoLog, err)
		}
		return nil, err
	}
	if want := ms[len(ms)-1].Version; version.Int64 < int64(want) {
		_ = db.Close()
		return nil, fmt.Errorf("the log's schema is at version %d and this build reads version %d: "+
			"open it once for writing (run or resume) to migrate it", version.Int64, want)
	}
	return db, nil
}

// walEmpty reports whether the log at path has no WAL content: no -wal
// file, or an empty one.
func walEmpty(path string) bool {
	fi, err := os.Stat(path + "-wal")
	return errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0)
}

// connect takes the write connection, optionally migrates, and prepares
// the append statements on it.
func (l *Log) connect(ctx context.Context, doMigrate bool) (*writer, error) {
	conn, err := l.writeDB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite eventlog %s: connect: %w%s", l.path, err, l.shmHint(err))
	}
	w := &writer{conn: conn}
	fail := func(err error) (*writer, error) {
		w.close()
		return nil, fmt.Errorf("sqlite eventlog %s: %w", l.path, err)
	}
	if doMigrate {
		if err := migrate(ctx, conn); err != nil {
			return fail(err)
		}
	}
	if w.begin, err = conn.PrepareContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fail(err)
	}
	if w.commit, err = conn.PrepareContext(ctx, "COMMIT"); err != nil {
		return fail(err)
	}
	if w.insert, err = conn.PrepareContext(ctx, `INSERT INTO events
		(execution_id, seq, type, step, command_id, loop_id, frame, attempt, worker_id, payload, meta, time)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (execution_id, command_id) WHERE type = 'command.issued' DO NOTHING
		ON CONFLICT (execution_id, loop_id) WHERE type = 'loop.done' DO NOTHING
		ON CONFLICT (execution_id, loop_id) WHERE type = 'loop.fanin.completed' DO NOTHING`); err != nil {
		return fail(err)
	}
	if w.execState, err = conn.PrepareContext(ctx,
		`SELECT last_seq, terminal IS NOT NULL FROM executions WHERE execution_id = ?`); err != nil {
		return fail(err)
	}
	// One probe of the partial index events_execution_started.
	if w.hasStart, err = conn.PrepareContext(ctx,
		`SELECT EXISTS (SELECT 1 FROM events WHERE execution_id = ? AND type = 'execution.started')`); err != nil {
		return fail(err)
	}
	if w.upsert, err = conn.PrepareContext(ctx, `INSERT INTO executions
		(execution_id, last_seq, first_id, started, started_at, terminal, finished_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (execution_id) DO UPDATE SET
			last_seq = excluded.last_seq,
			terminal = coalesce(terminal, excluded.terminal),
			finished_at = coalesce(finished_at, excluded.finished_at)`); err != nil {
		return fail(err)
	}
	return w, nil
}

// sqliteIOErrShmSize is SQLITE_IOERR_SHMSIZE: SQLite could not size the
// WAL's shared-memory file.
const sqliteIOErrShmSize = 4874

// shmHint explains an error SQLite reports only as "disk I/O error
// (4874)": a log no process holds open needs its -shm file created, which
// fails on a full disk, for readers (status, events) too.
func (l *Log) shmHint(err error) string {
	var coded interface{ Code() int }
	if errors.As(err, &coded) && coded.Code() == sqliteIOErrShmSize {
		return fmt.Sprintf(" (could not size the shared-memory file %s-shm: is the disk full?)", l.path)
	}
	return ""
}

func (w *writer) close() {
	for _, s := range []*sql.Stmt{w.insert, w.execState, w.upsert, w.hasStart, w.begin, w.commit} {
		if s != nil {
			_ = s.Close()
		}
	}
	_ = w.conn.Close()
}

// execState is what one Append knows about an execution it touches.
type execState struct {
	known      bool // the executions row existed before this append
	lastSeq    int64
	firstID    int64
	started    bool
	startedAt  int64
	terminal   any // string or nil
	finishedAt any // int64 or nil
	hadEnd     bool
	dirty      bool
	// hasStart is set once the execution is known to hold an
	// execution.started, in the log or earlier in the batch.
	hasStart bool
}

// Append implements eventlog.Log: one IMMEDIATE transaction per batch on
// the single write connection.
func (l *Log) Append(ctx context.Context, events []eventlog.Event) ([]eventlog.Result, error) {
	if results, stop, err := l.state.CheckAppend(ctx, events); stop {
		return results, err
	}
	if l.readOnly {
		return nil, fmt.Errorf("%s: append: %w", l.path, ErrReadOnly)
	}
	select {
	case l.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.state.Done():
		return nil, eventlog.ErrClosed
	}
	results, touched, err := l.appendLocked(ctx, events)
	<-l.slot
	if err != nil {
		return nil, err
	}
	for id := range touched {
		l.state.Notify(id)
	}
	return results, nil
}

func (l *Log) appendLocked(ctx context.Context, events []eventlog.Event) (_ []eventlog.Result, _ map[string]*execState, err error) {
	if l.state.Closed() {
		return nil, nil, eventlog.ErrClosed
	}
	if l.w == nil {
		if l.w, err = l.connect(ctx, false); err != nil {
			return nil, nil, err
		}
	}
	w := l.w
	if _, err := w.begin.ExecContext(ctx); err != nil {
		return nil, nil, l.writeErr(ctx, "begin", err)
	}
	defer func() {
		if err == nil {
			return
		}
		if _, rbErr := w.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil {
			// The connection is in an unknown state: start afresh next time.
			w.close()
			l.w = nil
		}
	}()

	// The transaction holds the file's write lock from BEGIN IMMEDIATE
	// on, so its statements wait for nothing: they run without ctx, which
	// spares each of them the driver's watcher goroutine of a cancellable
	// context. A ctx that ends meanwhile still refuses the batch before
	// it commits.
	tctx := context.WithoutCancel(ctx)
	now := time.Now().UnixNano()
	results := make([]eventlog.Result, len(events))
	states := make(map[string]*execState, 1)
	for i := range events {
		e := &events[i]
		st := states[e.ExecutionID]
		if st == nil {
			st = &execState{}
			switch err := w.execState.QueryRowContext(tctx, e.ExecutionID).Scan(&st.lastSeq, &st.hadEnd); {
			case err == nil:
				st.known = true
			case !errors.Is(err, sql.ErrNoRows):
				return nil, nil, l.writeErr(ctx, "read execution", err)
			}
			states[e.ExecutionID] = st
		}
		if e.Type == eventlog.TypeExecutionStarted {
			// A second start refuses the batch. The IMMEDIATE transaction
			// holds the file's write lock, so no other process can store
			// a start between this check and the insert.
			if !st.hasStart && st.known {
				if err := w.hasStart.QueryRowContext(tctx, e.ExecutionID).Scan(&st.hasStart); err != nil {
					return nil, nil, l.writeErr(ctx, "read execution", err)
				}
			}
			if st.hasStart {
				return nil, nil, &eventlog.AlreadyStartedError{ExecutionID: e.ExecutionID}
			}
			st.hasStart = true
		}
		if st.hadEnd {
			// The execution ended: nothing more of it is stored (a late
			// decision of an orchestrator that did not see the end).
			results[i] = eventlog.Result{Duplicate: true}
			continue
		}
		at := now
		if !e.Time.IsZero() {
			at = e.Time.UnixNano()
		}
		seq := st.lastSeq + 1
		// Exec rather than INSERT ... RETURNING: it is markedly cheaper
		// through database/sql, and the single writer makes LastInsertId
		// exact.
		r, err := w.insert.ExecContext(tctx, e.ExecutionID, seq, e.Type, nullString(e.Step), nullString(e.CommandID),
			nullString(e.LoopID), e.Frame, e.Attempt, nullString(e.WorkerID), nullString(string(e.Payload)),
			nullString(string(e.Meta)), at)
		var n, id int64
		if err == nil {
			n, err = r.RowsAffected()
		}
		if err == nil && n == 0 { // ON CONFLICT DO NOTHING: a duplicate
			results[i] = eventlog.Result{Duplicate: true}
			continue
		}
		if err == nil {
			id, err = r.LastInsertId()
		}
		if err != nil {
			return nil, nil, l.writeErr(ctx, "insert event", err)
		}
		results[i] = eventlog.Result{ID: id, Seq: seq}
		st.lastSeq = seq
		st.dirty = true
		if !st.known && st.firstID == 0 {
			st.firstID, st.started, st.startedAt = id, e.Type == eventlog.TypeExecutionStarted, at
		}
		if eventlog.IsTerminal(e.Type) && !st.hadEnd {
			st.hadEnd, st.terminal, st.finishedAt = true, e.Type, at
		}
	}
	for id, st := range states {
		if !st.dirty {
			delete(states, id)
			continue
		}
		if _, err := w.upsert.ExecContext(tctx, id, st.lastSeq, st.firstID, st.started, st.startedAt,
			st.terminal, st.finishedAt); err != nil {
			return nil, nil, l.writeErr(ctx, "update execution", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if _, err := w.commit.ExecContext(tctx); err != nil {
		return nil, nil, l.writeErr(ctx, "commit", err)
	}
	return results, states, nil
}

// writeErr maps an error of an append.
//
// The file is named: a disk full or a file gone read-only is for the
// operator to fix, and they need to know which file (the engine and the
// CLI pass this error on as it is). Like a read's, the error wraps
// eventlog.ErrUnavailable: the API answers 503 for it, as for any log.
func (l *Log) writeErr(ctx context.Context, op string, err error) error {
	return l.state.OpErr(ctx, "sqlite", l.path+": append: "+op, err)
}

// readErr maps an error of a read-side operation, naming the file too.
func (l *Log) readErr(ctx context.Context, op string, err error) error {
	return l.state.OpErr(ctx, "sqlite", l.path+": "+op, err)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Read implements eventlog.Log.
func (l *Log) Read(ctx context.Context, executionID string, afterSeq int64, limit int) ([]eventlog.Event, error) {
	if l.state.Closed() {
		return nil, eventlog.ErrClosed
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := l.readDB.QueryContext(ctx, `SELECT id, seq, type, coalesce(step, ''), coalesce(command_id, ''),
		coalesce(loop_id, ''), frame, attempt, coalesce(worker_id, ''), payload, meta, time
		FROM events WHERE execution_id = ? AND seq > ? ORDER BY seq LIMIT ?`, executionID, afterSeq, limit)
	if err != nil {
		return nil, l.readErr(ctx, "read", err)
	}
	defer rows.Close()
	var out []eventlog.Event
	for rows.Next() {
		e := eventlog.Event{ExecutionID: executionID}
		var payload, meta []byte
		var at int64
		if err := rows.Scan(&e.ID, &e.Seq, &e.Type, &e.Step, &e.CommandID, &e.LoopID, &e.Frame, &e.Attempt,
			&e.WorkerID, &payload, &meta, &at); err != nil {
			return nil, l.readErr(ctx, "read", err)
		}
		e.Payload, e.Meta, e.Time = payload, meta, time.Unix(0, at).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, l.readErr(ctx, "read", err)
	}
	return out, nil
}

// lastSeq returns the execution's highest seq, 0 if it has none.
func (l *Log) lastSeq(ctx context.Context, executionID string) (int64, error) {
	var seq int64
	err := l.readDB.QueryRowContext(ctx, `SELECT last_seq FROM executions WHERE execution_id = ?`, executionID).Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, l.readErr(ctx, "wait", err)
	}
	return seq, nil
}

// Wait implements eventlog.Log. Appends through this Log wake it at once;
// appends by other processes (or other Log values on the same file) are
// noticed within Config.PollInterval.
func (l *Log) Wait(ctx context.Context, executionID string, afterSeq int64) error {
	return l.state.Wait(ctx, executionID, afterSeq, l.cfg.PollInterval, l.lastSeq)
}

// Executions implements eventlog.Log, in one statement: an index range
// scan of executions_first_id from the page's position, which no
// per-statement bound cuts short.
func (l *Log) Executions(ctx context.Context, q eventlog.ExecutionsQuery) ([]string, error) {
	if l.state.Closed() {
		return nil, eventlog.ErrClosed
	}
	where, order, cmp := "true", "", ">"
	if q.Unfinished {
		where = "started AND terminal IS NULL"
	}
	if q.NewestFirst {
		order, cmp = " DESC", "<"
	}
	var args []any
	if q.After != "" {
		// NULL for an id the log does not hold: then no row compares.
		where += " AND first_id " + cmp + " (SELECT first_id FROM executions WHERE execution_id = ?)"
		args = append(args, q.After)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := l.readDB.QueryContext(ctx, "SELECT execution_id FROM executions WHERE "+where+
		" ORDER BY first_id"+order+" LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, l.readErr(ctx, "executions", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, l.readErr(ctx, "executions", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, l.readErr(ctx, "executions", err)
	}
	return ids, nil
}

// Close implements eventlog.Log: it waits for an append in progress, wakes
// every Wait with eventlog.ErrClosed and closes the database. Closing twice
// is a no-op.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.state.Close()
		l.slot <- struct{}{} // no append runs past this point
		if l.w != nil {
			l.w.close()
			l.w = nil
		}
		var errs []error
		if l.readDB != nil {
			errs = append(errs, l.readDB.Close())
		}
		if l.writeDB != nil {
			errs = append(errs, l.writeDB.Close())
		}
		if err := errors.Join(errs...); err != nil {
			l.closeErr = fmt.Errorf("sqlite eventlog: close: %w", err)
		}
	})
	return l.closeErr
}
