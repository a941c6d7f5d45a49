package sqlcursor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"

	"github.com/cursorflow/cursorflow/cursor"
)

// AttemptColumns are the column names (matched case-insensitively, in
// this order) read as a row's delivery counter.
var attemptColumns = [...]string{"attempts", "attempt", "attempt_count"}

// maxDeadLetterRounds bounds how often one Claim re-runs the claim while
// every row it returns is dead-lettered, so a dead_letter statement that
// leaves rows claimable cannot spin forever.
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

// Executor runs SQL against one database for a Cursor. Both methods run
// their SQL atomically (one transaction) and may retry once on a fresh
// connection when the server dropped the previous one. With args nil the
// SQL runs as written (several statements allowed); otherwise it is one
// statement whose parameters are bound to args (values of RenderParams).
type Executor interface {
	// Query runs sql and returns the last result set that has columns.
	Query(ctx context.Context, sql string, args []any) (Result, error)
	// Exec runs sql, discarding any result.
	Exec(ctx context.Context, sql string, args []any) error
}

// Cursor is a cursor.Cursor (and cursor.DeadLetterer) over a SQL source:
// it renders the claim, runs it through an Executor, turns the result into
// rows, and runs the ack, release and dead_letter statements.
type Cursor struct {
	spec   cursor.Spec
	opts   Options
	exec   Executor
	log    *slog.Logger
	closed atomic.Bool
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

// scope returns a shallow copy of the loop scope for one render.
func (c *Cursor) scope(extra int) map[string]any {
	vars := make(map[string]any, len(c.spec.Scope)+extra)
	maps.Copy(vars, c.spec.Scope)
	return vars
}

// Claim renders the claim with __frame_max_rows = max and __worker_slot_id
// = SlotID, runs it, and returns its rows. Rows whose attempt counter
// exceeds Spec.MaxAttempts are dead-lettered (when a dead_letter statement
// is configured) and not returned; if that leaves nothing, the claim runs
// again so that zero rows keeps meaning "drained". The claim SQL is
// trusted to honour __frame_max_rows: extra rows are returned rather than
// stranded in their claimed state.
func (c *Cursor) Claim(ctx context.Context, max int) ([]cursor.Row, error) {
	if c.closed.Load() {
		return nil, c.fail("claim", cursor.ErrClosed)
	}
	if max < 1 {
		return nil, c.fail("claim", fmt.Errorf("max rows %d, want at least 1", max))
	}
	vars := c.scope(2)
	vars["__frame_max_rows"] = max
	vars["__worker_slot_id"] = c.spec.SlotID
	for round := 0; ; round++ {
		stmt, err := c.spec.Claim.RenderString(vars)
		if err != nil {
			return nil, c.fail("claim", fmt.Errorf("render claim: %w", err))
		}
		args, err := RenderParams(c.opts.ClaimParams, vars)
		if err != nil {
			return nil, c.fail("claim", fmt.Errorf("render claim_params: %w", err))
		}
		res, err := c.exec.Query(ctx, stmt, args)
		if err != nil {
			return nil, c.fail("claim", err)
		}
		live, dead, err := c.rows(res)
		if err != nil {
			return nil, c.fail("claim", err)
		}
		if len(live) > max {
			c.log.Warn("sql cursor: claim returned more rows than __frame_max_rows", "max", max, "rows", len(live))
		}
		if len(dead) == 0 {
			return live, nil
		}
		reason := fmt.Sprintf("attempts exceeded max_attempts %d", c.spec.MaxAttempts)
		if err := c.DeadLetter(ctx, dead, reason); err != nil {
			if len(live) > 0 {
				// The poison rows stay claimed and come back through the
				// claim's reclaim clause; the live ones must not be lost.
				c.log.Error("sql cursor: dead-lettering poison rows failed", "rows", len(dead), "err", err)
				return live, nil
			}
			return nil, err
		}
		c.log.Info("sql cursor: dead-lettered rows past max attempts", "rows", len(dead), "max_attempts", c.spec.MaxAttempts)
		if len(live) > 0 {
			return live, nil
		}
		if round+1 >= maxDeadLetterRounds {
			return nil, c.fail("claim", fmt.Errorf("the claim returned only dead-lettered rows %d times in a row; does the dead_letter statement make them unclaimable?", maxDeadLetterRounds))
		}
	}
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
	for _, vals := range res.Rows {
		if len(vals) != len(res.Columns) {
			return nil, nil, fmt.Errorf("row has %d values for %d columns", len(vals), len(res.Columns))
		}
		row := cursor.Row{
			Key:    RowKey(vals, keyIdx),
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

// RowKey joins the key values of one row with "/".
func RowKey(vals []any, keyIdx []int) string {
	if len(keyIdx) == 1 {
		return KeyString(vals[keyIdx[0]])
	}
	parts := make([]string, len(keyIdx))
	for n, i := range keyIdx {
		parts[n] = KeyString(vals[i])
	}
	return strings.Join(parts, "/")
}

// Ack runs the ack statement (if configured) for rows.
func (c *Cursor) Ack(ctx context.Context, rows []cursor.Row) error {
	return c.run(ctx, "ack", c.opts.Ack, rows, "")
}

// Release runs the release statement (if configured) for rows.
func (c *Cursor) Release(ctx context.Context, rows []cursor.Row) error {
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
	vars := c.rowVars(rows, reason)
	stmt, err := st.SQL.RenderString(vars)
	if err != nil {
		return c.fail(op, fmt.Errorf("render %s: %w", op, err))
	}
	args, err := RenderParams(st.Params, vars)
	if err != nil {
		return c.fail(op, fmt.Errorf("render %s params: %w", op, err))
	}
	if err := c.exec.Exec(ctx, stmt, args); err != nil {
		return c.fail(op, err)
	}
	return nil
}

// rowVars is the render context of ack, release and dead_letter.
func (c *Cursor) rowVars(rows []cursor.Row, reason string) map[string]any {
	keys := make([]any, len(rows))
	values := make([]any, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
		values[i] = r.Values
	}
	vars := c.scope(4)
	vars["keys"] = keys
	vars["rows"] = values
	vars["reason"] = reason
	vars["__worker_slot_id"] = c.spec.SlotID
	return vars
}

// Close ends the cursor; later calls fail with cursor.ErrClosed. The
// driver's connections stay open.
func (c *Cursor) Close() error {
	c.closed.Store(true)
	return nil
}
