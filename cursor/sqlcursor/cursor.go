package sqlcursor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/dsl"
)

// AttemptColumns are the column names (matched case-insensitively, in
// this order) read as a row's delivery counter.
var attemptColumns = [...]string{"attempts", "attempt", "attempt_count"}

// maxDeadLetterRounds bounds how often one Claim re-runs the claim, in
// its one transaction, while every row it returns is dead-lettered, so a
// backlog of rows past max_attempts does not hold one transaction for
// ever: the claim then returns what it buried with More set, and the
// engine claims again once it has recorded them. (A dead_letter statement
// that leaves the rows it buried claimable is caught at once: the next
// round returns them again.)
const maxDeadLetterRounds = 100

// Result is the last row-returning result set of a statement.
type Result struct {
	// Columns are the result's column names; nil when no statement of the
	// SQL returned a result set.
	Columns []string
	// Rows hold values already converted with Normalize (or the driver's
	// own conversion into the same JSON-friendly types).
	Rows [][]any
}

// Executor runs SQL against one database for a Cursor. With args nil a
// statement runs as written (several statements allowed); otherwise it is
// one statement whose parameters are bound to args (values of
// RenderParams).
type Executor interface {
	// Claim runs a rendered claim in a new transaction and returns the
	// last result set that has columns, leaving the transaction open: the
	// caller ends it with Tx.Commit or Tx.Rollback, and a claimer that dies
	// first leaves it to the server, which rolls it back. Claim may retry
	// once on a fresh connection when the server dropped the connection (a
	// dropped connection never commits). On error nothing is left open.
	Claim(ctx context.Context, sql string, args []any) (Tx, Result, error)
	// Exec runs sql atomically in its own transaction, discarding any
	// result, and may retry once on a fresh connection as Claim does.
	Exec(ctx context.Context, sql string, args []any) error
	// Dialect names the database's SQL dialect (postgres, mysql, sqlite),
	// whose literals fill %(name)s placeholders (FillParams).
	Dialect() string
}

// Tx is a claim's open transaction. It holds one connection (and, in
// SQLite, the database's write lock) until Commit or Rollback.
type Tx interface {
	// Claim runs a rendered claim again inside the transaction, as
	// Executor.Claim runs it after opening one (with whatever the driver
	// adds to a claim, such as mysql's mark), and returns the last result
	// set that has columns. It sees what the transaction did before: a
	// claim that returned only rows past max_attempts runs again after
	// their dead_letter statement, uncommitted, so that Commit buries them
	// together with what the last round claimed, and Rollback buries
	// nothing. It is not retried: a dropped connection ends the
	// transaction, which the server rolls back.
	Claim(ctx context.Context, sql string, args []any) (Result, error)
	// Exec runs sql inside the transaction, with args as Executor.Exec.
	Exec(ctx context.Context, sql string, args []any) error
	// Commit commits the transaction. An error means the outcome is
	// unknown (the connection may have dropped on the way).
	Commit(ctx context.Context) error
	// Rollback rolls the transaction back; on a connection that is gone it
	// returns an error, and the server has rolled back already.
	Rollback(ctx context.Context) error
}

// DBTx adapts a database/sql transaction to Tx, for drivers built on
// database/sql. claim runs a claim statement in tx and reads its result,
// as the driver's Executor.Claim does once it has begun tx: Tx.Claim
// calls it. Commit and Rollback ignore their context: the context given
// to BeginTx governs the transaction.
func DBTx(tx *sql.Tx, claim func(ctx context.Context, tx *sql.Tx, stmt string, args []any) (Result, error)) Tx {
	return dbTx{tx, claim}
}

type dbTx struct {
	tx    *sql.Tx
	claim func(context.Context, *sql.Tx, string, []any) (Result, error)
}

func (t dbTx) Claim(ctx context.Context, stmt string, args []any) (Result, error) {
	if t.claim == nil {
		return Result{}, errors.New("sql cursor: DBTx was given no claim function")
	}
	return t.claim(ctx, t.tx, stmt, args)
}

func (t dbTx) Exec(ctx context.Context, stmt string, args []any) error {
	_, err := t.tx.ExecContext(ctx, stmt, args...)
	return err
}

func (t dbTx) Commit(context.Context) error { return t.tx.Commit() }

// Rollback rolls the transaction back. One that database/sql ended
// already, rolled back when the context given to BeginTx was cancelled
// (a stopping loop's claim made ahead), is what Rollback wants: no error.
// Commit is never followed by Rollback (cursor.Claim settles once).
func (t dbTx) Rollback(context.Context) error {
	if err := t.tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// Cursor is a cursor.Cursor (and cursor.DeadLetterer) over a SQL source:
// it renders the claim, runs it through an Executor in a transaction that
// stays open until the claim is committed or aborted, turns the result
// into rows, and runs the ack, release and dead_letter statements.
type Cursor struct {
	spec   cursor.Spec
	opts   Options
	exec   Executor
	log    *slog.Logger
	closed atomic.Bool
	// oversized is set once a claim returned more rows than asked for.
	oversized atomic.Bool

	mu      sync.Mutex
	pending *cursor.Claim // the claim not yet committed or aborted
}

var (
	_ cursor.Cursor       = (*Cursor)(nil)
	_ cursor.DeadLetterer = (*Cursor)(nil)
)

// New returns a cursor for spec running its SQL through exec. It parses
// spec.Options (see ParseOptions); a nil spec.Claim is an error. logger
// is used when spec.Logger is nil; both nil means slog.Default().
func New(spec cursor.Spec, exec Executor, logger *slog.Logger) (*Cursor, error) {
	if spec.Logger != nil {
		logger = spec.Logger
	}
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("cursor", spec.Kind, "auth", spec.Auth, "loop_id", spec.LoopID, "slot", spec.SlotID)
	c := &Cursor{spec: spec, exec: exec, log: logger}
	if spec.Claim == nil {
		return nil, c.fail("open", errors.New("no claim statement"))
	}
	if exec == nil {
		return nil, c.fail("open", errors.New("nil executor"))
	}
	opts, err := ParseOptions(spec.Options, logger)
	if err != nil {
		return nil, c.fail("open", err)
	}
	c.opts = opts
	return c, nil
}

func (c *Cursor) fail(op string, err error) error {
	return &cursor.ClaimError{Kind: c.spec.Kind, Auth: c.spec.Auth, Op: op, Err: err}
}

// SlotVars adds the slot variables every SQL statement of a cursor sees
// to vars: __worker_slot_id (spec.WorkerSlotID, or the slot index when
// the spec carries none) and __worker_slot_index (spec.SlotID).
func SlotVars(vars map[string]any, spec cursor.Spec) {
	id := spec.WorkerSlotID
	if id == 0 {
		id = int64(spec.SlotID)
	}
	vars["__worker_slot_id"] = id
	vars["__worker_slot_index"] = spec.SlotID
}

// Vars returns the render context of a statement about rows (ack,
// release, dead_letter, a driver's own such as mysql's mark): a copy of
// spec.Scope plus keys (the rows' keys), rows (their value maps), errors
// (one {"key": Row.Key, "error": Row.Error} map per row, "" for a row
// without an error), reason and the slot variables (SlotVars).
//
// errors is a list of objects, not of bare strings, so that a statement
// can join it to its table in one step, as JSON it binds or quotes:
// jsonb_to_recordset (PostgreSQL), JSON_TABLE (MySQL), json_each
// (SQLite) give rows of (key, error) without pairing two lists by
// position.
func Vars(spec cursor.Spec, rows []cursor.Row, reason string) map[string]any {
	keys := make([]any, len(rows))
	values := make([]any, len(rows))
	errs := make([]any, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
		values[i] = r.Values
		errs[i] = map[string]any{"key": r.Key, "error": r.Error}
	}
	vars := make(map[string]any, len(spec.Scope)+6)
	maps.Copy(vars, spec.Scope)
	vars["keys"] = keys
	vars["rows"] = values
	vars["errors"] = errs
	vars["reason"] = reason
	SlotVars(vars, spec)
	return vars
}

// Render renders a statement template with vars, in which it sets
// dsl.SQLDialectVar to dialect (so sql_literal and sql_ident quote for the
// database), and fills its %(name)s placeholders (FillParams) with
// literals of dialect. Only a statement
// whose source, as the playbook wrote it, holds a placeholder is filled:
// values a template splices into a statement without one (a row's text
// through sql_literal, say "50%% off" or "%(x)s") reach the database as
// they are, rather than being read as placeholders. In a statement whose
// source holds one, every %(name)s and %% of the rendered text is read,
// as psycopg reads the text it is given: bind such values (params)
// instead.
func Render(t *dsl.Template, vars map[string]any, dialect string) (string, error) {
	// sql_literal and sql_ident without a dialect quote for this database.
	vars[dsl.SQLDialectVar] = dialect
	stmt, err := t.RenderString(vars)
	if err != nil {
		return "", err
	}
	if t == nil || !hasParams(t.Source) {
		return stmt, nil
	}
	return FillParams(stmt, vars, dialect)
}

// Claim renders the claim with __frame_max_rows = max and the slot
// variables, runs it in a transaction (Executor.Claim) and returns its
// rows as a claim whose Commit commits that transaction and whose Abort
// rolls it back. Rows whose attempt counter exceeds Spec.MaxAttempts are
// dead-lettered in the same transaction (when a dead_letter statement is
// configured), listed in the claim's Dead and not returned. If that
// leaves no row, the claim runs again in the same transaction (Tx.Claim),
// so that zero rows keeps meaning "drained": nothing is committed before
// the engine records the claim, so a drained claim that lists rows dead
// buries them when it commits, and its Abort, or the claimer's death,
// buries none. A claim of zero rows and no dead rows commits at once (a
// reclaim clause in it keeps its effect). The claim SQL is trusted to
// honour __frame_max_rows: extra rows are returned rather than stranded
// in their claimed state.
func (c *Cursor) Claim(ctx context.Context, max int) (*cursor.Claim, error) {
	if c.closed.Load() {
		return nil, c.fail("claim", cursor.ErrClosed)
	}
	if max < 1 {
		return nil, c.fail("claim", fmt.Errorf("max rows %d, want at least 1", max))
	}
	c.mu.Lock()
	busy := c.pending != nil
	c.mu.Unlock()
	if busy {
		return nil, c.fail("claim", errors.New("the cursor's previous claim is neither committed nor aborted"))
	}
	vars := maps.Clone(c.spec.Scope)
	if vars == nil {
		vars = map[string]any{}
	}
	vars["__frame_max_rows"] = max
	SlotVars(vars, c.spec)
	stmt, err := Render(c.spec.Claim, vars, c.exec.Dialect())
	if err != nil {
		return nil, c.fail("claim", fmt.Errorf("render claim: %w", err))
	}
	args, err := c.renderParams(c.opts.ClaimParams, vars)
	if err != nil {
		return nil, c.fail("claim", fmt.Errorf("render claim_params: %w", err))
	}
	tx, res, err := c.exec.Claim(ctx, stmt, args)
	if err != nil {
		return nil, c.fail("claim", err)
	}
	live, buried, more, err := c.claimRounds(ctx, tx, stmt, args, res)
	if err != nil {
		// Nothing of any round is committed: rows buried by an earlier
		// round stay where they were, for a later claim.
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, c.fail("claim", err)
	}
	if len(live) > max && !c.oversized.Swap(true) {
		// Once per cursor: a claim that ignores __frame_max_rows (a
		// hard-coded LIMIT) does so at every claim of the loop.
		c.log.Warn("sql cursor: claim returned more rows than __frame_max_rows (said once per cursor; its frames run every row claimed)",
			"max", max, "rows", len(live))
	}
	if len(live) == 0 && len(buried) == 0 {
		if err := tx.Commit(ctx); err != nil {
			return nil, c.fail("claim", fmt.Errorf("commit: %w", err))
		}
		return cursor.NewClaim(nil, nil, nil), nil
	}
	// A drained claim that buried rows is held too: the engine commits it
	// once the frame.done that reports them dead is recorded.
	claim := c.hold(live, tx)
	claim.Dead, claim.More = buried, more
	return claim, nil
}

// claimRounds takes the first round's result res of the claim stmt in tx
// and dead-letters its rows past max_attempts; while a round returns only
// such rows it runs the claim again in tx, up to maxDeadLetterRounds
// rounds (more then reports that it stopped with rows possibly left). It
// returns the last round's live rows and every round's dead ones, all
// uncommitted.
func (c *Cursor) claimRounds(ctx context.Context, tx Tx, stmt string, args []any, res Result) (live, buried []cursor.Row, more bool, err error) {
	seen := map[string]struct{}{} // keys buried by earlier rounds
	for round := 1; ; round++ {
		live, dead, err := c.rows(res)
		if err != nil {
			return nil, nil, false, err
		}
		for _, r := range dead {
			if _, again := seen[r.Key]; again {
				return nil, nil, false, fmt.Errorf("the claim returned row %q again after the cursor's dead_letter statement "+
					"set it aside in the same transaction: the dead_letter statement must make the rows it is given "+
					"unclaimable (move them, or set a status the claim skips)", r.Key)
			}
			seen[r.Key] = struct{}{}
		}
		if len(dead) > 0 {
			if err := c.buryInTx(ctx, tx, dead); err != nil {
				return nil, nil, false, err
			}
			buried = append(buried, dead...)
		}
		if len(live) > 0 || len(dead) == 0 {
			return live, buried, false, nil
		}
		if round >= maxDeadLetterRounds {
			c.log.Info("sql cursor: the claim found only rows past max_attempts in every round; reporting those, then claiming again",
				"rounds", round, "dead", len(buried))
			return nil, buried, true, nil
		}
		if res, err = tx.Claim(ctx, stmt, args); err != nil {
			return nil, nil, false, fmt.Errorf("claim again after burying %d rows past max_attempts: %w", len(buried), err)
		}
	}
}

// buryInTx runs the dead_letter statement for poison rows inside the
// claim's transaction, so they are dead-lettered exactly when the claim
// commits.
func (c *Cursor) buryInTx(ctx context.Context, tx Tx, dead []cursor.Row) error {
	reason := fmt.Sprintf("attempts exceeded max_attempts %d", c.spec.MaxAttempts)
	vars := Vars(c.spec, dead, reason)
	stmt, err := Render(c.opts.DeadLetter.SQL, vars, c.exec.Dialect())
	if err != nil {
		return fmt.Errorf("render dead_letter: %w", err)
	}
	args, err := c.renderParams(c.opts.DeadLetter.Params, vars)
	if err != nil {
		return fmt.Errorf("render dead_letter params: %w", err)
	}
	if err := tx.Exec(ctx, stmt, args); err != nil {
		return fmt.Errorf("dead_letter of %d rows past max attempts: %w", len(dead), err)
	}
	c.log.Info("sql cursor: dead-lettered rows past max attempts", "rows", len(dead), "max_attempts", c.spec.MaxAttempts)
	return nil
}

// renderParams is RenderParams, keeping lists for a ListBinder.
func (c *Cursor) renderParams(params []*dsl.Value, vars map[string]any) ([]any, error) {
	lb, ok := c.exec.(ListBinder)
	return renderParams(params, vars, ok && lb.BindsLists())
}

// hold returns the pending claim of rows in tx.
func (c *Cursor) hold(rows []cursor.Row, tx Tx) *cursor.Claim {
	end := func(op string, f func(context.Context) error) func(context.Context) error {
		return func(ctx context.Context) error {
			c.mu.Lock()
			c.pending = nil
			c.mu.Unlock()
			if err := f(ctx); err != nil {
				return c.fail(op, err)
			}
			return nil
		}
	}
	claim := cursor.NewClaim(rows, end("commit", tx.Commit), end("abort", tx.Rollback))
	c.mu.Lock()
	c.pending = claim
	c.mu.Unlock()
	return claim
}

// rows turns a result into cursor rows, split into live rows and rows to
// dead-letter.
func (c *Cursor) rows(res Result) (live, dead []cursor.Row, err error) {
	if res.Columns == nil {
		return nil, nil, errors.New("the claim returned no result set (does it end with SELECT or RETURNING?)")
	}
	keyIdx, err := KeyColumns(res.Columns, c.opts.Key)
	if err != nil {
		return nil, nil, err
	}
	attIdx := AttemptColumn(res.Columns)
	deadLetter := c.spec.MaxAttempts > 0 && attIdx >= 0 && c.opts.DeadLetter != nil
	live = make([]cursor.Row, 0, len(res.Rows))
	seen := make(map[string]struct{}, len(res.Rows))
	for _, vals := range res.Rows {
		if len(vals) != len(res.Columns) {
			return nil, nil, fmt.Errorf("row has %d values for %d columns", len(vals), len(res.Columns))
		}
		if i := NullKey(vals, keyIdx); i >= 0 {
			return nil, nil, fmt.Errorf("%w: a claimed row has NULL in key column %q; a row's key identifies it "+
				"(its outcome, hand-backs and dead letter are kept by key, and ack, release and dead_letter reach it by key): "+
				"claim only rows whose key is set, or name a column that is never NULL with the cursor's key option",
				ErrNullKey, res.Columns[i])
		}
		key := RowKey(vals, keyIdx)
		if _, dup := seen[key]; dup {
			return nil, nil, fmt.Errorf("%w: the claim returned two rows with key %q (key columns %q); a row's key identifies it "+
				"(its outcome, hand-backs and dead letter are kept by key, and ack, release and dead_letter reach it by key): "+
				"name columns that identify a row with the cursor's key option, or claim each key once",
				ErrDuplicateKey, key, keyNames(res.Columns, keyIdx))
		}
		seen[key] = struct{}{}
		row := cursor.Row{
			Key:    key,
			Values: make(map[string]any, len(vals)),
			Lease:  cursor.Lease{Attempt: 1},
		}
		for i, col := range res.Columns {
			row.Values[col] = vals[i]
		}
		if attIdx >= 0 {
			n, err := attemptValue(vals[attIdx])
			if err != nil {
				return nil, nil, fmt.Errorf("column %q: %w", res.Columns[attIdx], err)
			}
			row.Lease.Attempt = max(n, 1)
		}
		if deadLetter && row.Lease.Attempt > c.spec.MaxAttempts {
			dead = append(dead, row)
			continue
		}
		live = append(live, row)
	}
	return live, dead, nil
}

// KeyColumns resolves the key columns of a result: the configured ones
// (matched exactly, then case-insensitively), else "id" if present, else
// the first column.
func KeyColumns(columns, key []string) ([]int, error) {
	if len(columns) == 0 {
		return nil, errors.New("the claim returned no columns")
	}
	if len(key) == 0 {
		if i := columnIndex(columns, "id"); i >= 0 {
			return []int{i}, nil
		}
		return []int{0}, nil
	}
	idx := make([]int, len(key))
	for n, k := range key {
		i := columnIndex(columns, k)
		if i < 0 {
			return nil, fmt.Errorf("key column %q is not among the claimed columns %v", k, columns)
		}
		idx[n] = i
	}
	return idx, nil
}

// keyNames returns the names of the key columns keyIdx of columns.
func keyNames(columns []string, keyIdx []int) []string {
	names := make([]string, len(keyIdx))
	for n, i := range keyIdx {
		names[n] = columns[i]
	}
	return names
}

// AttemptColumn returns the index of the attempt counter column
// (attempts, attempt or attempt_count) or -1.
func AttemptColumn(columns []string) int {
	for _, name := range attemptColumns {
		if i := columnIndex(columns, name); i >= 0 {
			return i
		}
	}
	return -1
}

func columnIndex(columns []string, name string) int {
	for i, c := range columns {
		if c == name {
			return i
		}
	}
	for i, c := range columns {
		if strings.EqualFold(c, name) {
			return i
		}
	}
	return -1
}

// ErrNullKey is wrapped by the error of a claim that returned a row whose
// key column (or a part of its composite key) is NULL. Such a row has no
// identity: two of them would share one key.
var ErrNullKey = errors.New("sql cursor: NULL row key")

// NullKey returns the index (into vals) of the first key column of one
// row that is NULL, or -1 if none is.
func NullKey(vals []any, keyIdx []int) int {
	for _, i := range keyIdx {
		if vals[i] == nil {
			return i
		}
	}
	return -1
}

// ErrDuplicateKey is wrapped by the error of a claim that returned two
// rows with the same key: their outcomes, hand-backs and dead letters
// would be kept under one key, and ack, release and dead_letter, which
// reach rows by key, would settle both rows for either.
var ErrDuplicateKey = errors.New("sql cursor: duplicate row key")

// RowKey returns the key of one row: the string form (KeyString) of its
// one key column, or of a composite key's parts joined with "/". When a
// part of a composite key holds "/", the key is "/" followed by every
// part with "%" written "%25" and "/" written "%2F", joined with "/":
// such a key has one "/" more than a plain one, so no two rows share a
// key unless all their key values do. Keys whose parts hold no "/" are
// the plain join, as they were before composite keys were escaped, so
// that keys recorded then and statements that rebuild keys in SQL
// (a || '/' || b) still meet them.
func RowKey(vals []any, keyIdx []int) string {
	if len(keyIdx) == 1 {
		return KeyString(vals[keyIdx[0]])
	}
	parts := make([]string, len(keyIdx))
	slash := false
	for n, i := range keyIdx {
		parts[n] = KeyString(vals[i])
		slash = slash || strings.Contains(parts[n], "/")
	}
	if !slash {
		return strings.Join(parts, "/")
	}
	for n, p := range parts {
		parts[n] = keyPartEscaper.Replace(p)
	}
	return "/" + strings.Join(parts, "/")
}

var keyPartEscaper = strings.NewReplacer("%", "%25", "/", "%2F")

// Ack runs the ack statement (if configured) for rows.
func (c *Cursor) Ack(ctx context.Context, rows []cursor.Row) error {
	return c.run(ctx, "ack", c.opts.Ack, rows, "")
}

// Release runs the release statement for rows. Without a release
// statement the rows cannot be handed back: it returns an error wrapping
// cursor.ErrUnsupported.
func (c *Cursor) Release(ctx context.Context, rows []cursor.Row) error {
	if c.opts.Release == nil && !c.closed.Load() && len(rows) > 0 {
		return c.fail("release", fmt.Errorf("%w: no release statement in the cursor block", cursor.ErrUnsupported))
	}
	return c.run(ctx, "release", c.opts.Release, rows, "")
}

// DeadLetter runs the dead_letter statement for rows with {{ reason }}
// set. Without a dead_letter statement it returns an error wrapping
// cursor.ErrUnsupported.
func (c *Cursor) DeadLetter(ctx context.Context, rows []cursor.Row, reason string) error {
	if c.opts.DeadLetter == nil {
		if c.closed.Load() {
			return c.fail("dead_letter", cursor.ErrClosed)
		}
		return c.fail("dead_letter", fmt.Errorf("%w: no dead_letter statement in the cursor block", cursor.ErrUnsupported))
	}
	return c.run(ctx, "dead_letter", c.opts.DeadLetter, rows, reason)
}

func (c *Cursor) run(ctx context.Context, op string, st *Statement, rows []cursor.Row, reason string) error {
	if c.closed.Load() {
		return c.fail(op, cursor.ErrClosed)
	}
	if st == nil || len(rows) == 0 {
		return nil
	}
	vars := Vars(c.spec, rows, reason)
	stmt, err := Render(st.SQL, vars, c.exec.Dialect())
	if err != nil {
		return c.fail(op, fmt.Errorf("render %s: %w", op, err))
	}
	args, err := c.renderParams(st.Params, vars)
	if err != nil {
		return c.fail(op, fmt.Errorf("render %s params: %w", op, err))
	}
	if err := c.exec.Exec(ctx, stmt, args); err != nil {
		return c.fail(op, err)
	}
	return nil
}

// Close ends the cursor; later calls fail with cursor.ErrClosed. A claim
// still pending is aborted (rolled back). The driver's connections stay
// open.
func (c *Cursor) Close() error {
	c.closed.Store(true)
	c.mu.Lock()
	pending := c.pending
	c.mu.Unlock()
	if pending != nil {
		if err := pending.Abort(context.Background()); err != nil {
			c.log.Debug("sql cursor: rolling back the pending claim at close", "err", err)
		}
	}
	return nil
}
