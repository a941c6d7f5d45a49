package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/sqlcursor"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/internal/sqlquote"
)

// maxLockRetries bounds how often a statement is re-run after InnoDB
// chose it as a deadlock victim or its lock wait timed out; both roll
// the transaction back, so a re-run cannot apply anything twice.
const maxLockRetries = 3

// executor runs one cursor's SQL. A claim is one READ COMMITTED
// transaction: the claim (normally a SELECT ... FOR UPDATE SKIP LOCKED,
// possibly after other statements) and then, when rows came back, the
// mark statement rendered with those rows, then COMMIT. READ COMMITTED
// keeps InnoDB from taking gap locks on the scanned range, so concurrent
// claimers skip each other's rows instead of waiting on gaps.
type executor struct {
	db   *sql.DB
	pool *pool
	log  *slog.Logger
	mark *dsl.Template
	key  []string
	spec cursor.Spec
	// idle sets the claim's idle transaction timeout (idleTimeout); empty
	// when the spec has no lease.
	idle string
}

// idleTimeout is the statement that bounds how long a claim's
// transaction may sit idle, waiting for its COMMIT, to hold (the frame
// lease) rounded up to whole seconds; "" when hold is zero. A claimer
// that stalls with its connection open (a paused process, a frozen VM)
// keeps its claim's rows locked, and claims that skip locked rows walk
// past them. MariaDB closes such a connection once it has sat idle in
// the claim for a frame lease, long after the engine fenced the attempt,
// and rolls the claim back; the engine does not let the drain end before
// then (a claim that finds nothing within a lease of a lost attempt does
// not drain its slot), so the rows are claimed again.
//
// The variables are session variables, so the timeout stays on the pooled
// connection: the ack, release and dead_letter transactions that later
// run on it commit as soon as their statement returns, and a connection
// outside a transaction is bounded by wait_timeout alone, so it reaches
// only a client that stalls inside a transaction, whose connection is
// then dropped (and a statement retried on a fresh one). Each claim sets
// it again, as cursors with other leases share the pool. All three are
// set because the write and read-only ones, when a server sets them,
// take precedence over idle_transaction_timeout. MySQL has none of them
// and refuses the statement (error 1193); see withIdleTimeout. It ends
// in "; ", not a line break, so that the line numbers in a claim's syntax
// errors stay the claim's.
func idleTimeout(hold time.Duration) string {
	if hold <= 0 {
		return ""
	}
	s := min(max((hold+time.Second-1)/time.Second, 1), 31536000) // the variables' range
	return fmt.Sprintf("SET SESSION idle_transaction_timeout = %[1]d, SESSION idle_write_transaction_timeout = %[1]d, SESSION idle_readonly_transaction_timeout = %[1]d; ", s)
}

var _ sqlcursor.Executor = (*executor)(nil)

// Claim runs the claim (args bound to its ? placeholders) and, when it
// returned rows, the mark statement in one READ COMMITTED transaction that
// it leaves open for the caller to commit or roll back. A deadlock or a
// dropped connection before the claim completed is retried as a whole
// (InnoDB rolled it back).
func (e *executor) Claim(ctx context.Context, stmt string, args []any) (sqlcursor.Tx, sqlcursor.Result, error) {
	var tx *sql.Tx
	var res sqlcursor.Result
	err := e.retry(ctx, "claim", func() error {
		var err error
		tx, err = e.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if res, err = e.claim(ctx, tx, stmt, args); err != nil {
			_ = tx.Rollback()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, sqlcursor.Result{}, err
	}
	return claimTx{sqlcursor.DBTx(tx, e.claim)}, res, nil
}

// claimTx is a claim's open transaction. A statement run in it (the
// dead_letter of rows past max_attempts, the claim run again after it)
// that loses its connection took the whole claim down with it,
// uncommitted: its error is classified, so that the engine claims again
// rather than fail the loop.
type claimTx struct{ sqlcursor.Tx }

// Claim runs the claim and its mark again in the transaction (e.claim).
func (t claimTx) Claim(ctx context.Context, stmt string, args []any) (sqlcursor.Result, error) {
	res, err := t.Tx.Claim(ctx, stmt, args)
	return res, classify(err)
}

func (t claimTx) Exec(ctx context.Context, stmt string, args []any) error {
	return classify(t.Tx.Exec(ctx, stmt, args))
}

func (e *executor) Exec(ctx context.Context, stmt string, args []any) error {
	if isBlank(stmt) {
		// MySQL rejects an empty query (error 1065); nothing to run.
		return nil
	}
	return e.retry(ctx, "exec", func() error {
		tx, err := e.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
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
	})
}

// Dialect is MySQL's: string literals with backslashes escaped, as the
// server reads them unless NO_BACKSLASH_ESCAPES is set.
func (e *executor) Dialect() string { return sqlquote.MySQL }

// claim runs the claim and the mark in tx, with the idle transaction
// timeout set in front of the first of them that goes to the server as
// text (a claim with bound params is a prepared statement, which holds a
// single statement): the timeout costs no round trip of its own unless
// the claim has params and no mark.
func (e *executor) claim(ctx context.Context, tx *sql.Tx, stmt string, args []any) (sqlcursor.Result, error) {
	idle := e.idleTimeout() // the SET still to send, if any
	var res sqlcursor.Result
	err := e.withIdleTimeout(&idle, len(args) == 0, func(prefix string) (err error) {
		res, err = query(ctx, tx, prefix+stmt, args)
		return err
	})
	if err != nil {
		return sqlcursor.Result{}, err
	}
	if len(res.Rows) == 0 {
		// Nothing claimed: the transaction holds no row of a claim.
		return res, nil
	}
	var mark string
	if e.mark != nil {
		if mark, err = e.renderMark(res); err != nil {
			return sqlcursor.Result{}, err
		}
	}
	if mark == "" && idle == "" {
		return res, nil
	}
	err = e.withIdleTimeout(&idle, true, func(prefix string) error {
		if prefix+mark == "" {
			return nil // the SET alone, refused: nothing else to send
		}
		_, err := tx.ExecContext(ctx, prefix+mark)
		return err
	})
	if err != nil && mark != "" {
		return sqlcursor.Result{}, fmt.Errorf("mark: %w", err)
	}
	return res, err
}

// idleTimeout is e.idle unless the server refused it before.
func (e *executor) idleTimeout() string {
	if e.pool.noIdleTimeout.Load() {
		return ""
	}
	return e.idle
}

// withIdleTimeout runs fn with *idle, the SET still to send, as the
// prefix of its statement when ok, else with none; *idle is spent once
// fn ran with it. A server without the variables (MySQL) refuses the
// SET, the first statement of the batch, before running the rest; the
// pool then remembers it and fn runs again without it, in the same
// transaction (a refused statement does not end it).
func (e *executor) withIdleTimeout(idle *string, ok bool, fn func(prefix string) error) error {
	if *idle == "" || !ok {
		return fn("")
	}
	err := fn(*idle)
	*idle = ""
	if !unknownIdleVariable(err) {
		return err
	}
	if !e.pool.noIdleTimeout.Swap(true) {
		e.log.Warn("mysql cursor: the server has no idle transaction timeout (MySQL); a claimer that stalls with its claim open holds its rows until its connection closes", "err", err)
	}
	return fn("")
}

// unknownIdleVariable reports the server refusing the idle transaction
// timeout variables: ER_UNKNOWN_SYSTEM_VARIABLE naming one of them.
func unknownIdleVariable(err error) bool {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1193 {
		return false
	}
	for _, v := range []string{"idle_transaction_timeout", "idle_write_transaction_timeout", "idle_readonly_transaction_timeout"} {
		if strings.Contains(me.Message, v) {
			return true
		}
	}
	return false
}

// renderMark renders the mark statement for the claimed rows, with the
// same variables as ack and release (sqlcursor.Vars).
func (e *executor) renderMark(res sqlcursor.Result) (string, error) {
	idx, err := sqlcursor.KeyColumns(res.Columns, e.key)
	if err != nil {
		return "", err
	}
	rows := make([]cursor.Row, len(res.Rows))
	for i, vals := range res.Rows {
		if len(vals) != len(res.Columns) {
			return "", fmt.Errorf("row has %d values for %d columns", len(vals), len(res.Columns))
		}
		m := make(map[string]any, len(vals))
		for j, col := range res.Columns {
			m[col] = vals[j]
		}
		rows[i] = cursor.Row{Key: sqlcursor.RowKey(vals, idx), Values: m}
	}
	s, err := sqlcursor.Render(e.mark, sqlcursor.Vars(e.spec, rows, ""), e.Dialect())
	if err != nil {
		return "", fmt.Errorf("render mark: %w", err)
	}
	return s, nil
}

// retry runs fn, once more after the server dropped the connection (a
// restart, KILL, a proxy timeout) and up to maxLockRetries times after a
// deadlock or lock wait timeout. A dropped connection never commits its
// open transaction, so the retry cannot claim twice.
func (e *executor) retry(ctx context.Context, op string, fn func() error) error {
	lost, locked := 0, 0
	for {
		err := fn()
		if err == nil || ctx.Err() != nil {
			return err
		}
		switch {
		case connectionLost(err) && lost == 0:
			lost++
			e.log.Warn("mysql cursor: connection lost; retrying once on a fresh connection", "op", op, "err", err)
		case lockConflict(err) && locked < maxLockRetries:
			locked++
			e.log.Info("mysql cursor: lock conflict; retrying", "op", op, "err", err)
		default:
			return classify(err)
		}
	}
}

// Server error numbers that mean the connection, not the statement,
// failed: ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED (MariaDB), client
// errors CR_SERVER_GONE_ERROR and CR_SERVER_LOST, and MySQL 8's
// ER_CLIENT_INTERACTION_TIMEOUT.
var lostConnectionErrors = map[uint16]bool{1053: true, 1927: true, 2006: true, 2013: true, 4031: true}

// connectionLost reports errors that mean the connection failed.
func connectionLost(err error) bool {
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, gomysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var me *gomysql.MySQLError
	return errors.As(err, &me) && lostConnectionErrors[me.Number]
}

// classify marks the errors that may pass by themselves (a lost or
// refused connection, a lock conflict, too many connections) transient,
// so that the engine tries the operation again for a while.
func classify(err error) error {
	var me *gomysql.MySQLError
	if connectionLost(err) || lockConflict(err) || errors.As(err, &me) && me.Number == 1040 {
		return cursor.MarkTransient(err)
	}
	return err
}

// lockConflict reports a deadlock (1213) or a lock wait timeout (1205);
// InnoDB rolled the statement or transaction back.
func lockConflict(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// query runs stmt (one or several statements; one with args bound to its
// ? placeholders) and returns the last result set that has columns.
func query(ctx context.Context, tx *sql.Tx, stmt string, args []any) (sqlcursor.Result, error) {
	rows, err := tx.QueryContext(ctx, stmt, args...)
	if err != nil {
		return sqlcursor.Result{}, err
	}
	defer rows.Close()
	var res sqlcursor.Result
	for {
		cols, err := rows.ColumnTypes()
		if err != nil {
			return sqlcursor.Result{}, err
		}
		if len(cols) > 0 {
			cur := sqlcursor.Result{Columns: make([]string, len(cols)), Rows: [][]any{}}
			for i, c := range cols {
				cur.Columns[i] = c.Name()
			}
			raw := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range raw {
				ptrs[i] = &raw[i]
			}
			for rows.Next() {
				if err := rows.Scan(ptrs...); err != nil {
					return sqlcursor.Result{}, err
				}
				vals := make([]any, len(cols))
				for i, v := range raw {
					vals[i], err = convert(cols[i].DatabaseTypeName(), v)
					if err != nil {
						return sqlcursor.Result{}, fmt.Errorf("column %q: %w", cols[i].Name(), err)
					}
				}
				cur.Rows = append(cur.Rows, vals)
			}
			if err := rows.Err(); err != nil {
				return sqlcursor.Result{}, err
			}
			res = cur
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return sqlcursor.Result{}, err
	}
	return res, rows.Close()
}
