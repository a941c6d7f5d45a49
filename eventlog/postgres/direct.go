package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cursorflow/cursorflow/eventlog"
)

// The lean statement (appendPlain) carries a drain's batches: a frame's
// claim with every row's values, its outcomes. Through pgx each of its
// array parameters is encoded into a buffer pgx drops after every
// statement once it passes 256 bytes, so every append grew one from
// nothing to the size of its payloads, doubling: about a sixth of what a
// frame drain allocated. appendPlainDirect encodes the parameters in
// PostgreSQL's binary format into a buffer kept for the next append and
// runs the statement prepared on the connection, as pgx's statement
// cache would, with the same parameters and the same answer.

// Type OIDs of appendPlain's parameters and results. A server that
// infers other types for them (none does) gets the pgx path.
const (
	oidText        = 25
	oidInt8        = 20
	oidTextArray   = 1009
	oidInt8Array   = 1016
	oidTimestampTZ = 1184
	oidTSTZArray   = 1185
)

// plainParams is the number of appendPlain's parameters.
const plainParams = 13

var plainParamOIDs = [plainParams]uint32{
	oidText,      // $1 execution_id
	oidTextArray, // $2 type
	oidTextArray, // $3 step
	oidTextArray, // $4 command_id
	oidTextArray, // $5 loop_id
	oidInt8Array, // $6 frame
	oidInt8Array, // $7 attempt
	oidTextArray, // $8 worker_id
	oidTextArray, // $9 payload
	oidTextArray, // $10 meta
	oidTSTZArray, // $11 time
	oidInt8,      // $12 the number of events
	oidTextArray, // $13 the command_ids of the batch's command.issued
}

// binaryFormats is every parameter's and result column's format code.
var binaryFormats = func() []int16 {
	f := make([]int16, plainParams)
	for i := range f {
		f[i] = 1
	}
	return f
}()

// maxKeptParams bounds the buffer kept between appends: a fan-out's batch
// of thousands of events is encoded in one of its own.
const maxKeptParams = 1 << 20

// directParams is one append's encoded parameters (Log.params keeps
// them for the next append).
type directParams struct {
	buf    []byte
	values [][]byte
}

// directMode reports whether appends may use a statement prepared by name
// on the pool's connections: only where pgx itself does
// (QueryExecModeCacheStatement, its default). A pool set to another mode
// (a pooler in transaction mode, say) keeps the pgx path.
func directMode(mode pgx.QueryExecMode) bool { return mode == pgx.QueryExecModeCacheStatement }

// plainStatementName names the lean statement prepared on a connection:
// one per schema, as its text is.
func plainStatementName(sql string) string { return statementName("cursorflow_append_plain_", sql) }

// statementName names a statement prepared by name: prefix and a hash of
// its text.
func statementName(prefix, sql string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(sql))
	return prefix + strconv.FormatUint(h.Sum64(), 16)
}

// guardParams encodes guard's arguments for its statement sd with the
// connection's type map, in the format pgx would choose for each; ok is
// false for an argument the map cannot encode so (the pgx path, which
// knows more kinds of argument, takes the append).
func guardParams(m *pgtype.Map, sd *pgconn.StatementDescription, guard *AppendGuard) (values [][]byte, formats []int16, ok bool) {
	if len(sd.ParamOIDs) != len(guard.Args) {
		return nil, nil, false
	}
	values, formats = make([][]byte, len(guard.Args)), make([]int16, len(guard.Args))
	for i, arg := range guard.Args {
		oid := sd.ParamOIDs[i]
		formats[i] = m.FormatCodeForOID(oid)
		v, err := m.Encode(oid, formats[i], arg, nil)
		if err != nil {
			return nil, nil, false
		}
		values[i] = v
	}
	return values, formats, true
}

// appendPlainDirect appends a plain batch (plainIssued) of execution id
// through the lean statement prepared on a pooled connection, after the
// guard (prepared too) in the same round trip and transaction when there
// is one. handled is false when it stored nothing and the pgx path is to
// run instead: the pool's mode does not prepare by name, the server has
// other types for the parameters or the returned id and seq, a guard's
// argument is not one the type map encodes, or a change of the events
// table invalidated the prepared statement (it is dropped, and prepared
// again by the next append). Otherwise the results and error are
// readPlain's (or the guard's error), the caller mapping them as for the
// pgx path.
func (l *Log) appendPlainDirect(ctx context.Context, id string, events []eventlog.Event, issued []string, guard *AppendGuard) (results []eventlog.Result, handled bool, err error) {
	if !l.direct {
		return nil, false, nil
	}
	bctx, cancel := l.bound(ctx)
	defer cancel()
	c, err := l.pool.Acquire(bctx)
	if err != nil {
		return nil, true, err
	}
	defer c.Release()
	sd, err := c.Conn().Prepare(bctx, l.plainName, l.sql.appendPlain)
	if err != nil {
		return nil, true, err
	}
	if !slices.Equal(sd.ParamOIDs, plainParamOIDs[:]) || len(sd.Fields) != 2 ||
		sd.Fields[0].DataTypeOID != oidInt8 || sd.Fields[1].DataTypeOID != oidInt8 {
		return nil, false, nil
	}
	b := &pgconn.Batch{}
	var guardName string
	if guard != nil {
		guardName = statementName("cursorflow_append_guard_", guard.SQL)
		gsd, err := c.Conn().Prepare(bctx, guardName, guard.SQL)
		if err != nil {
			return nil, true, err
		}
		values, formats, ok := guardParams(c.Conn().TypeMap(), gsd, guard)
		if !ok {
			return nil, false, nil
		}
		b.ExecPrepared(gsd.Name, values, formats, nil)
	}
	p, _ := l.params.Get().(*directParams)
	if p == nil {
		p = new(directParams)
	}
	defer func() {
		if cap(p.buf) <= maxKeptParams {
			p.buf, p.values = p.buf[:0], p.values[:0]
			l.params.Put(p)
		}
	}()
	p.encodePlain(id, events, issued)
	b.ExecPrepared(sd.Name, p.values, binaryFormats, binaryFormats[:2])
	// One Sync after both: one implicit transaction. A guard that raises
	// ends it before the append runs.
	mrr := c.Conn().PgConn().ExecBatch(bctx, b)
	results, err = readDirect(mrr, guard != nil, len(events))
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "0A000" /* feature_not_supported: "cached plan must not change result type" */ {
			// Nothing was stored (the transaction failed as a whole); the
			// next append prepares the statements again.
			_ = c.Conn().Deallocate(bctx, l.plainName)
			if guardName != "" {
				_ = c.Conn().Deallocate(bctx, guardName)
			}
			return nil, false, nil
		}
		return nil, true, err
	}
	results, err = plainResults(results, len(events))
	return results, true, err
}

// readDirect reads appendPlainDirect's batch: the guard's result if
// guarded, then the append's rows; its error is the first statement's
// that failed.
func readDirect(mrr *pgconn.MultiResultReader, guarded bool, n int) ([]eventlog.Result, error) {
	results := make([]eventlog.Result, 0, n)
	var decodeErr error
	if guarded && mrr.NextResult() {
		if _, err := mrr.ResultReader().Close(); err != nil {
			_ = mrr.Close()
			return nil, err
		}
	}
	if !mrr.NextResult() {
		if err := mrr.Close(); err != nil {
			return nil, err
		}
		return nil, errors.New("append returned no result")
	}
	rr := mrr.ResultReader()
	for rr.NextRow() {
		v := rr.Values()
		if len(v) != 2 || len(v[0]) != 8 || len(v[1]) != 8 {
			decodeErr = errors.New("append returned a row that is not two bigints")
			continue
		}
		results = append(results, eventlog.Result{
			ID:  int64(binary.BigEndian.Uint64(v[0])),
			Seq: int64(binary.BigEndian.Uint64(v[1])),
		})
	}
	if _, err := rr.Close(); err != nil {
		_ = mrr.Close()
		return nil, err
	}
	if err := mrr.Close(); err != nil {
		return nil, err // the commit happens at the Sync
	}
	return results, decodeErr
}

// encodePlain encodes appendPlain's parameters ($1 to $13) for a batch of
// one execution, as pgx encodes the pgx path's: empty strings as they
// are (the statement turns them into NULL), an empty payload or meta as
// NULL, a zero time as now.
func (p *directParams) encodePlain(id string, events []eventlog.Event, issued []string) {
	now := time.Now()
	var starts [plainParams + 1]int
	mark := func(i int) { starts[i] = len(p.buf) }
	text := func(i int, f func(e *eventlog.Event) string) {
		mark(i)
		p.buf = arrayHeader(p.buf, oidText, len(events), false)
		for k := range events {
			s := f(&events[k])
			p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(len(s)))
			p.buf = append(p.buf, s...)
		}
	}
	bytesOrNull := func(i int, f func(e *eventlog.Event) []byte) {
		mark(i)
		nulls := false
		for k := range events {
			if len(f(&events[k])) == 0 {
				nulls = true
				break
			}
		}
		p.buf = arrayHeader(p.buf, oidText, len(events), nulls)
		for k := range events {
			b := f(&events[k])
			if len(b) == 0 {
				p.buf = binary.BigEndian.AppendUint32(p.buf, 0xffffffff) // -1: NULL
				continue
			}
			p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(len(b)))
			p.buf = append(p.buf, b...)
		}
	}
	int8s := func(i int, f func(e *eventlog.Event) int64) {
		mark(i)
		p.buf = arrayHeader(p.buf, oidInt8, len(events), false)
		for k := range events {
			p.buf = binary.BigEndian.AppendUint32(p.buf, 8)
			p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(f(&events[k])))
		}
	}
	mark(0)
	p.buf = append(p.buf, id...)
	text(1, func(e *eventlog.Event) string { return e.Type })
	text(2, func(e *eventlog.Event) string { return e.Step })
	text(3, func(e *eventlog.Event) string { return e.CommandID })
	text(4, func(e *eventlog.Event) string { return e.LoopID })
	int8s(5, func(e *eventlog.Event) int64 { return int64(e.Frame) })
	int8s(6, func(e *eventlog.Event) int64 { return int64(e.Attempt) })
	text(7, func(e *eventlog.Event) string { return e.WorkerID })
	bytesOrNull(8, func(e *eventlog.Event) []byte { return e.Payload })
	bytesOrNull(9, func(e *eventlog.Event) []byte { return e.Meta })
	mark(10)
	p.buf = arrayHeader(p.buf, oidTimestampTZ, len(events), false)
	for k := range events {
		t := events[k].Time
		if t.IsZero() {
			t = now
		}
		p.buf = binary.BigEndian.AppendUint32(p.buf, 8)
		p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(microsSinceY2K(t)))
	}
	mark(11)
	p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(len(events)))
	mark(12)
	p.buf = arrayHeader(p.buf, oidText, len(issued), false)
	for _, s := range issued {
		p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(len(s)))
		p.buf = append(p.buf, s...)
	}
	starts[plainParams] = len(p.buf)
	// Sliced once the buffer has stopped growing.
	for i := range plainParamOIDs {
		p.values = append(p.values, p.buf[starts[i]:starts[i+1]:starts[i+1]])
	}
}

// arrayHeader appends a one-dimensional array's header in PostgreSQL's
// binary format (array_send): no dimension for an empty array.
func arrayHeader(b []byte, elem uint32, n int, nulls bool) []byte {
	if n == 0 {
		b = binary.BigEndian.AppendUint32(b, 0) // dimensions
		b = binary.BigEndian.AppendUint32(b, 0) // no nulls
		return binary.BigEndian.AppendUint32(b, elem)
	}
	b = binary.BigEndian.AppendUint32(b, 1)
	var flags uint32
	if nulls {
		flags = 1
	}
	b = binary.BigEndian.AppendUint32(b, flags)
	b = binary.BigEndian.AppendUint32(b, elem)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	return binary.BigEndian.AppendUint32(b, 1) // lower bound
}

// microsSinceY2K is t as a timestamptz's binary value: microseconds since
// 2000-01-01 00:00:00 UTC, the fraction below a microsecond dropped as
// pgx drops it.
func microsSinceY2K(t time.Time) int64 {
	const unixToY2K = 946684800 * 1000000
	return t.Unix()*1000000 + int64(t.Nanosecond())/1000 - unixToY2K
}
