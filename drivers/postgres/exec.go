package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/cursor/sqlcursor"
	"github.com/cursorflow/cursorflow/internal/pgparam"
)

// executor runs a cursor's SQL on a pool with the simple query protocol,
// so a claim may hold several statements (they run as one implicit
// transaction) and needs no prepared statement; SQL with bound params
// runs as one statement of the extended protocol, its params as text.
type executor struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

func (e *executor) Query(ctx context.Context, sql string, args []any) (sqlcursor.Result, error) {
	params, err := encodeArgs(args)
	if err != nil {
		return sqlcursor.Result{}, err
	}
	var res sqlcursor.Result
	err = e.retry(ctx, "query", func(c *pgxpool.Conn) error {
		var err error
		res, err = query(ctx, c, sql, params)
		return err
	})
	return res, err
}

func (e *executor) Exec(ctx context.Context, sql string, args []any) error {
	params, err := encodeArgs(args)
	if err != nil {
		return err
	}
	return e.retry(ctx, "exec", func(c *pgxpool.Conn) error {
		if params != nil {
			_, err := c.Conn().PgConn().ExecParams(ctx, sql, params, nil, nil, nil).Close()
			return err
		}
		_, err := c.Conn().PgConn().Exec(ctx, sql).ReadAll()
		return err
	})
}

// encodeArgs encodes bound params (nil: none).
func encodeArgs(args []any) ([][]byte, error) {
	if args == nil {
		return nil, nil
	}
	params, err := pgparam.Encode(args)
	if err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	if params == nil {
		params = [][]byte{}
	}
	return params, nil
}

// retry runs fn on a pooled connection, and once more on a fresh one when
// the first failed because the server dropped the connection (a restart,
// pg_terminate_backend, a proxy timeout). A dropped backend never commits
// its open transaction, so the retry cannot apply a claim twice; at worst
// a claim committed just before the drop stays claimed until the claim
// SQL's reclaim clause or the engine's frame lease brings it back.
func (e *executor) retry(ctx context.Context, op string, fn func(*pgxpool.Conn) error) error {
	for attempt := 0; ; attempt++ {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("acquire connection: %w", err)
		}
		err = fn(c)
		broken := c.Conn().IsClosed()
		c.Release()
		if err == nil {
			return nil
		}
		if attempt > 0 || ctx.Err() != nil || !broken && !connectionLost(err) {
			return err
		}
		// The other idle connections most likely died with this one.
		e.pool.Reset()
		e.log.Warn("postgres cursor: connection lost; retrying once on a fresh connection", "op", op, "err", err)
	}
}

// connectionLost reports errors that mean the connection, not the
// statement, failed.
func connectionLost(err error) bool {
	if pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
		// cannot_connect_now, class 08 connection exceptions.
		return strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08")
	}
	return false
}

// query runs sql (with params: as one bound statement) and returns the
// last result set that has columns.
func query(ctx context.Context, c *pgxpool.Conn, sql string, params [][]byte) (sqlcursor.Result, error) {
	m := c.Conn().TypeMap()
	var res sqlcursor.Result
	var decodeErr error
	// read takes one statement's result; a non-nil error ends the query.
	read := func(rr *pgconn.ResultReader) error {
		fds := rr.FieldDescriptions()
		if len(fds) == 0 || decodeErr != nil {
			_, err := rr.Close()
			return err
		}
		cur := sqlcursor.Result{Columns: make([]string, len(fds)), Rows: [][]any{}}
		fields := make([]pgconn.FieldDescription, len(fds))
		copy(fields, fds)
		for i, fd := range fields {
			cur.Columns[i] = fd.Name
		}
		for rr.NextRow() {
			raw := rr.Values()
			vals := make([]any, len(raw))
			for i, b := range raw {
				v, err := decode(m, fields[i], b)
				if err != nil && decodeErr == nil {
					decodeErr = fmt.Errorf("column %q: %w", fields[i].Name, err)
				}
				vals[i] = v
			}
			cur.Rows = append(cur.Rows, vals)
		}
		if _, err := rr.Close(); err != nil {
			return err
		}
		res = cur
		return nil
	}
	if params != nil {
		if err := read(c.Conn().PgConn().ExecParams(ctx, sql, params, nil, nil, nil)); err != nil {
			return sqlcursor.Result{}, err
		}
	} else {
		mrr := c.Conn().PgConn().Exec(ctx, sql)
		for mrr.NextResult() {
			if err := read(mrr.ResultReader()); err != nil {
				_ = mrr.Close()
				return sqlcursor.Result{}, err
			}
		}
		if err := mrr.Close(); err != nil {
			return sqlcursor.Result{}, err
		}
	}
	if decodeErr != nil {
		// The statement has committed; its rows stay claimed until the
		// reclaim clause or the frame lease hands them out again.
		return sqlcursor.Result{}, decodeErr
	}
	return res, nil
}

// decode turns one raw column value into a JSON-friendly Go value.
func decode(m *pgtype.Map, fd pgconn.FieldDescription, raw []byte) (any, error) {
	if raw == nil {
		return nil, nil
	}
	switch fd.DataTypeOID {
	case pgtype.JSONOID, pgtype.JSONBOID:
		if fd.Format == pgtype.BinaryFormatCode && fd.DataTypeOID == pgtype.JSONBOID && len(raw) > 0 {
			raw = raw[1:] // jsonb binary format: version byte, then text
		}
		return decodeJSON(raw)
	}
	dt, ok := m.TypeForOID(fd.DataTypeOID)
	if !ok {
		if fd.Format == pgtype.TextFormatCode {
			return string(raw), nil
		}
		return sqlcursor.Normalize(append([]byte(nil), raw...)), nil
	}
	v, err := dt.Codec.DecodeValue(m, fd.DataTypeOID, fd.Format, raw)
	if err != nil {
		return nil, err
	}
	return normalize(v), nil
}
