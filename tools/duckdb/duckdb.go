// Package duckdb is cursorflow's duckdb tool, compatible with NoETL's
// `kind: duckdb` tasks: SQL against an embedded DuckDB database (the
// maintained github.com/duckdb/duckdb-go binding; it needs cgo).
//
// Task configuration:
//
//	command | query | sql   the SQL, one or more statements
//	database | path        a local database file; created when missing.
//	                       Without one, each call gets a fresh in-memory
//	                       database that ends with the call.
//	auth | credential      instead of database: a keychain alias whose
//	                       URL is the file (duckdb:///abs/path, or a path)
//
// Data is {"columns", "rows", "row_count"} of the LAST statement that
// returned rows, as the postgres tool reports it; when none did, columns
// and rows are empty and row_count is the rows the last statement
// changed. Values are plain JSON-friendly Go values: integers int64 (a
// HUGEINT beyond int64 keeps its decimal text), floats float64, DECIMAL
// float64 when exact else its text, DATE "2006-01-02", TIMESTAMP ISO 8601
// without zone, TIMESTAMPTZ RFC 3339, UUID its text, BLOB its bytes as a
// string, LIST/STRUCT/MAP nested values.
//
// A failed statement is an error Output whose Error is DuckDB's message,
// with Data {"retryable": false} (DuckDB errors are about the SQL or the
// file, not transient); a missing command is a returned error.
//
// The tool keeps one database handle per file, opened on first use and
// shared by every call (DuckDB serialises writers itself); Close releases
// them.
package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"strings"
	"sync"
	"time"

	duckdbgo "github.com/duckdb/duckdb-go/v2"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/conv"
)

// ErrBadConfig is wrapped by the errors Execute returns for a task that
// names no SQL or an unusable database.
var ErrBadConfig = errors.New("duckdb: bad task configuration")

// ErrClosed is returned by Execute after Close.
var ErrClosed = errors.New("duckdb: tool closed")

// Config configures the duckdb tool.
type Config struct {
	// Keychain resolves auth aliases when a Call carries no Keychain.
	// Optional.
	Keychain tools.Keychain
}

// Tool is the duckdb tool. Create it with New; it is safe for concurrent
// use.
type Tool struct {
	cfg    Config
	mu     sync.Mutex
	dbs    map[string]*sql.DB
	closed bool
}

// New returns the duckdb tool.
func New(cfg Config) *Tool { return &Tool{cfg: cfg, dbs: map[string]*sql.DB{}} }

// Close closes every database file the tool opened.
func (t *Tool) Close() error {
	t.mu.Lock()
	dbs := t.dbs
	t.dbs, t.closed = nil, true
	t.mu.Unlock()
	var errs []error
	for _, db := range dbs {
		errs = append(errs, db.Close())
	}
	return errors.Join(errs...)
}

// TakesSecrets implements tools.SecretTaker: DuckDB SQL reads and writes
// local files with the worker's rights (a CREATE SECRET for S3 is the
// usual reason to reveal one), and the tool is opt-in
// (builtin.Options.EnableDuckDB) for that reason.
func (t *Tool) TakesSecrets() bool { return true }

// ConfigKeys implements tools.ConfigKeyLister: the keys of the package doc,
// aliases included (db_path for database).
func (t *Tool) ConfigKeys() []string {
	return []string{"command", "query", "sql", "database", "path", "db_path", "auth", "credential", "credentials"}
}

// Execute runs the task's SQL.
func (t *Tool) Execute(ctx context.Context, call *tools.Call) (tools.Output, error) {
	query, ok := conv.String(call.Config, "command", "query", "sql")
	if !ok || strings.TrimSpace(query) == "" {
		return tools.Output{}, fmt.Errorf("%w: command (or query, sql) is required", ErrBadConfig)
	}
	path, err := t.path(ctx, call)
	if err != nil {
		return tools.Output{}, err
	}
	if path == "" {
		// A fresh in-memory database for this call alone.
		db, err := sql.Open("duckdb", "")
		if err != nil {
			return tools.Output{}, fmt.Errorf("duckdb: open in-memory database: %w", err)
		}
		defer db.Close()
		return run(ctx, db, query), nil
	}
	db, err := t.db(path)
	if err != nil {
		return tools.Output{}, err
	}
	return run(ctx, db, query), nil
}

// path returns the database file the call names, "" for in-memory.
func (t *Tool) path(ctx context.Context, call *tools.Call) (string, error) {
	if p, ok := conv.String(call.Config, "database", "path", "db_path"); ok && p != "" && p != ":memory:" {
		return p, nil
	}
	alias, ok := conv.Alias(call.Config)
	if !ok {
		return "", nil
	}
	kc := call.Keychain
	if kc == nil {
		kc = t.cfg.Keychain
	}
	if kc == nil {
		return "", fmt.Errorf("duckdb: credential %q: no keychain configured: %w", alias, tools.ErrCredentialNotFound)
	}
	cred, err := kc.Resolve(ctx, alias)
	if err != nil {
		return "", fmt.Errorf("duckdb: %w", err)
	}
	p := cred.URL
	if strings.HasPrefix(p, "duckdb:") {
		u, err := url.Parse(p)
		if err != nil {
			return "", fmt.Errorf("%w: credential %q: not a duckdb URL", ErrBadConfig, alias)
		}
		p = u.Path
		if p == "" {
			p = u.Opaque
		}
	}
	if p == "" || p == ":memory:" {
		return "", nil
	}
	return p, nil
}

func (t *Tool) db(path string) (*sql.DB, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	if db := t.dbs[path]; db != nil {
		return db, nil
	}
	db, err := sql.Open("duckdb", path)
	if err != nil {
		return nil, fmt.Errorf("duckdb: open %s: %w", path, err)
	}
	t.dbs[path] = db
	return db, nil
}

// run executes query (all its statements) and builds the Output from the
// last statement that returned rows.
func run(ctx context.Context, db *sql.DB, query string) tools.Output {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return fail(err)
	}
	columns := make([]any, len(types))
	names := make([]string, len(types))
	for i, ct := range types {
		columns[i], names[i] = ct.Name(), ct.Name()
	}
	out := []any{}
	vals := make([]any, len(types))
	ptrs := make([]any, len(types))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fail(err)
		}
		row := make(map[string]any, len(names))
		for i, v := range vals {
			row[names[i]] = plain(v, types[i].DatabaseTypeName())
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if len(names) == 1 && names[0] == "Count" && len(out) == 1 {
		// A statement without a result set (INSERT, UPDATE, ...) reports
		// the rows it changed as a single Count column.
		return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{
			"columns": []any{}, "rows": []any{}, "row_count": out[0].(map[string]any)["Count"],
		}}
	}
	return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{
		"columns": columns, "rows": out, "row_count": int64(len(out)),
	}}
}

func fail(err error) tools.Output {
	return tools.Output{Status: tools.StatusError, Error: err.Error(), Data: map[string]any{"retryable": false}}
}

// plain converts a scanned DuckDB value into a JSON-friendly Go value.
func plain(v any, dbType string) any {
	switch x := v.(type) {
	case nil, bool, string, int64, float64:
		return x
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		if x > math.MaxInt64 {
			return fmt.Sprint(x)
		}
		return int64(x)
	case float32:
		return float64(x)
	case *big.Int:
		if x.IsInt64() {
			return x.Int64()
		}
		return x.String()
	case duckdbgo.Decimal:
		return jsonnum.Decimal(x.String())
	case duckdbgo.UUID:
		return x.String()
	case time.Time:
		switch dbType {
		case "DATE":
			return x.Format(time.DateOnly)
		case "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE":
			return x.Format(time.RFC3339Nano)
		case "TIME":
			return x.Format("15:04:05.999999")
		}
		return x.Format("2006-01-02T15:04:05.999999")
	case duckdbgo.Interval:
		return map[string]any{"months": int64(x.Months), "days": int64(x.Days), "micros": x.Micros}
	case []byte:
		if dbType == "UUID" && len(x) == 16 {
			return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
		}
		return string(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e, "")
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plain(e, "")
		}
		return out
	case duckdbgo.Map:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(plain(k, ""))] = plain(e, "")
		}
		return out
	}
	return fmt.Sprint(v)
}
