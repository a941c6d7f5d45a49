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
	log  *slog.Logger
	mark *dsl.Template
	key  []string
	spec cursor.Spec
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
	return sqlcursor.DBTx(tx), res, nil
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

func (e *executor) claim(ctx context.Context, tx *sql.Tx, stmt string, args []any) (sqlcursor.Result, error) {
	res, err := query(ctx, tx, stmt, args)
	if err != nil {
		return sqlcursor.Result{}, err
	}
	if e.mark == nil || len(res.Rows) == 0 {
		return res, nil
	}
	mark, err := e.renderMark(res)
	if err != nil {
		return sqlcursor.Result{}, err
	}
	if _, err := tx.ExecContext(ctx, mark); err != nil {
		return sqlcursor.Result{}, fmt.Errorf("mark: %w", err)
	}
	return res, nil
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
