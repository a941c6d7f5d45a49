package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/sqlcursor"
	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/internal/pgparam"
	"github.com/cursorflow/cursorflow/internal/pgretry"
	"github.com/cursorflow/cursorflow/internal/sqlquote"
)

// executor runs a cursor's SQL on a pool with the simple query protocol,
// so a claim may hold several statements and needs no prepared statement;
// SQL with bound params runs as one statement of the extended protocol,
// its params as text.
type executor struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// begin opens a claim's transaction (beginFor).
	begin string
}

var _ sqlcursor.Executor = (*executor)(nil)

// claimBegin opens a claim's transaction. Its commit does not wait for
// the WAL flush (synchronous_commit off): the engine's log holds the
// claimed rows before the commit is sent, so a server crash that loses the
// commit only hands the rows back, as a failed COMMIT would, and they run
// again (at least once). The claim itself may SET LOCAL it back on.
const claimBegin = "BEGIN;\nSET LOCAL synchronous_commit = off;\n"

// beginFor is claimBegin with the claim's idle time bounded by hold (the
// frame lease; zero: unbounded). A claimer that stalls with its
// connection open (a paused process, a frozen VM) keeps its claim's rows
// locked, and claims that skip locked rows walk past them. PostgreSQL
// ends such a session once it has sat idle in the claim for a frame
// lease, long after the engine fenced the attempt; the engine does not let
// the drain end before then (a claim that finds nothing within a lease of
// a lost attempt does not drain its slot), so the rows are claimed again.
func beginFor(hold time.Duration) string {
	if hold <= 0 {
		return claimBegin
	}
	return claimBegin + fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d;\n", max(hold.Milliseconds(), 1))
}

// Claim sends BEGIN and the claim in one round trip (with bound params:
// BEGIN, then the claim as one statement of the extended protocol) and
// keeps the connection, with its transaction open, in the returned Tx.
//
// The claim is planned afresh at every frame, on purpose: a claim
// prepared once keeps the plan made for the table it first saw. A queue
// analyzed while all its rows were pending finds its primary key as cheap
// as the partial index on pending rows; with that plan kept, every claim
// walks past all the rows claimed before it. BenchmarkClaimPlan measures
// it: prepared (as pgx runs a query by default), the same drain costs the
// server 6 to 23 times as much CPU per claim as it does sent as text,
// where planning is a few percent of the claim.
func (e *executor) Claim(ctx context.Context, sql string, args []any) (sqlcursor.Tx, sqlcursor.Result, error) {
	params, err := encodeArgs(args)
	if err != nil {
		return nil, sqlcursor.Result{}, err
	}
	var tx *pgTx
	var res sqlcursor.Result
	err = e.retry(ctx, "claim", func(c *pgxpool.Conn) (bool, error) {
		var err error
		if params == nil {
			res, err = query(ctx, c, e.begin+sql, nil, nil)
		} else if _, err = c.Conn().PgConn().Exec(ctx, e.begin).ReadAll(); err == nil {
			// On error the connection goes back to the pool inside its
			// transaction, and the pool closes it: nothing is claimed.
			res, err = query(ctx, c, sql, args, params)
		}
		if err != nil {
			return false, err
		}
		tx = &pgTx{c: c}
		return true, nil
	})
	if err != nil {
		return nil, sqlcursor.Result{}, err
	}
	return tx, res, nil
}

func (e *executor) Exec(ctx context.Context, sql string, args []any) error {
	params, err := encodeArgs(args)
	if err != nil {
		return err
	}
	return e.retry(ctx, "exec", func(c *pgxpool.Conn) (bool, error) {
		return false, execOn(ctx, c.Conn(), sql, args, params)
	})
}

// execOn runs sql on a connection, discarding any result: with params
// (args encoded) as one bound statement, otherwise with the simple
// protocol.
func execOn(ctx context.Context, c *pgx.Conn, sql string, args []any, params [][]byte) error {
	if params != nil {
		if err := pgparam.Typed(ctx, c.PgConn(), c.TypeMap(), sql, args, params); err != nil {
			return err
		}
		_, err := c.PgConn().ExecParams(ctx, sql, params, nil, nil, nil).Close()
		return err
	}
	_, err := c.PgConn().Exec(ctx, sql).ReadAll()
	return err
}

// BindsLists implements sqlcursor.ListBinder: a list goes as an array
// where the statement wants one (pgparam.Typed), else as its JSON.
func (e *executor) BindsLists() bool { return true }

// Dialect is PostgreSQL's.
func (e *executor) Dialect() string { return sqlquote.Postgres }

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
// its open transaction, so the retry cannot apply a claim twice. fn
// reports whether it keeps the connection (an open claim); otherwise the
// connection goes back to the pool, or is destroyed when it is broken or
// still inside a transaction.
func (e *executor) retry(ctx context.Context, op string, fn func(*pgxpool.Conn) (keep bool, err error)) error {
	for attempt := 0; ; attempt++ {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			err = fmt.Errorf("acquire connection: %w", err)
			if connectMayPass(err) {
				err = cursor.MarkTransient(err)
			}
			return err
		}
		keep, err := fn(c)
		if keep {
			return nil
		}
		broken := c.Conn().IsClosed()
		c.Release()
		if err == nil {
			return nil
		}
		if attempt > 0 || ctx.Err() != nil || !broken && !pgretry.ConnectionLost(err) {
			return err
		}
		// The other idle connections most likely died with this one.
		e.pool.Reset()
		e.log.Warn("postgres cursor: connection lost; retrying once on a fresh connection", "op", op, "err", err)
	}
}

// connectMayPass reports whether a failure to connect may pass by itself
// (the server unreachable, restarting, or not accepting connections for
// now), as opposed to a refused login or a database that does not exist.
func connectMayPass(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return !strings.HasPrefix(pgErr.Code, "28") && pgErr.Code != "3D000"
	}
	return !errors.Is(err, context.Canceled)
}

// pgTx is a claim's open transaction on its pooled connection.
type pgTx struct {
	c *pgxpool.Conn
}

// Claim runs a claim again on the transaction's connection: the claim
// alone, BEGIN and its settings having been sent with the first.
func (t *pgTx) Claim(ctx context.Context, sql string, args []any) (sqlcursor.Result, error) {
	if t.c == nil {
		return sqlcursor.Result{}, errors.New("transaction already ended")
	}
	params, err := encodeArgs(args)
	if err != nil {
		return sqlcursor.Result{}, err
	}
	return query(ctx, t.c, sql, args, params)
}

func (t *pgTx) Exec(ctx context.Context, sql string, args []any) error {
	if t.c == nil {
		return errors.New("transaction already ended")
	}
	params, err := encodeArgs(args)
	if err != nil {
		return err
	}
	return execOn(ctx, t.c.Conn(), sql, args, params)
}

// Commit commits the claim. PostgreSQL answers COMMIT in a failed
// transaction with a ROLLBACK tag, not an error; that is reported as one.
func (t *pgTx) Commit(ctx context.Context) error {
	tag, err := t.end(ctx, "COMMIT")
	if err == nil && tag != "COMMIT" {
		err = fmt.Errorf("commit: the transaction was rolled back (%s)", tag)
	}
	return err
}

func (t *pgTx) Rollback(ctx context.Context) error {
	_, err := t.end(ctx, "ROLLBACK")
	return err
}

// end sends stmt and gives the connection back to the pool (which closes
// it if it is broken or still in a transaction).
func (t *pgTx) end(ctx context.Context, stmt string) (string, error) {
	if t.c == nil {
		return "", errors.New("transaction already ended")
	}
	c := t.c
	t.c = nil
	defer c.Release()
	res, err := c.Conn().PgConn().Exec(ctx, stmt).ReadAll()
	if err != nil {
		return "", err
	}
	if len(res) == 0 {
		return "", fmt.Errorf("%s: no reply", stmt)
	}
	return res[len(res)-1].CommandTag.String(), nil
}

// rowChunk is how many rows' values query allocates at once.
const rowChunk = 16

// query runs sql (with params, args encoded: as one bound statement) and
// returns the last result set that has columns.
func query(ctx context.Context, c *pgxpool.Conn, sql string, args []any, params [][]byte) (sqlcursor.Result, error) {
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
		cur := sqlcursor.Result{Columns: make([]string, len(fds)), Rows: make([][]any, 0, rowChunk)}
		fields := make([]pgconn.FieldDescription, len(fds))
		copy(fields, fds)
		for i, fd := range fields {
			cur.Columns[i] = fd.Name
		}
		// Rows' values are cut from chunks of rowChunk rows: a claim of
		// 100 rows makes 7 slices, not 100. Its JSON columns' text shares
		// strs's chunks: one copy for many rows, not one a row.
		var chunk []any
		var strs jsonnum.Strings
		for rr.NextRow() {
			raw := rr.Values()
			if len(chunk) < len(raw) {
				chunk = make([]any, rowChunk*len(raw))
			}
			vals := chunk[:len(raw):len(raw)]
			chunk = chunk[len(raw):]
			for i, b := range raw {
				v, err := decode(m, fields[i], b, &strs)
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
		if err := pgparam.Typed(ctx, c.Conn().PgConn(), m, sql, args, params); err != nil {
			return sqlcursor.Result{}, err
		}
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
		// Nothing is committed yet: the caller's connection release rolls
		// the claim back.
		return sqlcursor.Result{}, decodeErr
	}
	return res, nil
}

// decodeInt reads an integer column's text as its codec would, to the
// int64 normalize makes of it, without the codec's allocation of its
// target; ok is false for anything else (binary format, or text the
// codec is to word the error for).
func decodeInt(fd pgconn.FieldDescription, raw []byte) (any, bool) {
	if fd.Format != pgtype.TextFormatCode {
		return nil, false
	}
	bits := 64
	switch fd.DataTypeOID {
	case pgtype.Int4OID:
		bits = 32
	case pgtype.Int2OID:
		bits = 16
	}
	n, err := strconv.ParseInt(string(raw), 10, bits)
	if err != nil {
		return nil, false
	}
	return n, true
}

// decode turns one raw column value into a JSON-friendly Go value; the
// text of a json or jsonb value is kept in strs (nil: its own).
func decode(m *pgtype.Map, fd pgconn.FieldDescription, raw []byte, strs *jsonnum.Strings) (any, error) {
	if raw == nil {
		return nil, nil
	}
	switch fd.DataTypeOID {
	case pgtype.JSONOID, pgtype.JSONBOID:
		if fd.Format == pgtype.BinaryFormatCode && fd.DataTypeOID == pgtype.JSONBOID && len(raw) > 0 {
			raw = raw[1:] // jsonb binary format: version byte, then text
		}
		return decodeJSON(raw, strs)
	case pgtype.Int8OID, pgtype.Int4OID, pgtype.Int2OID:
		if n, ok := decodeInt(fd, raw); ok {
			return n, nil
		}
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
