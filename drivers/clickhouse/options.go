package clickhouse

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
)

// Option names read from the cursor block (Spec.Options).
const (
	OptURL         = "url"
	OptTable       = "table"
	OptKey         = "key"
	OptColumns     = "columns"
	OptWhere       = "where"
	OptOrderBy     = "order_by"
	OptClaimsTable = "claims_table"
	OptDoneTable   = "done_table"
	OptDeadTable   = "dead_table"
)

// DefaultKey is the key column when the cursor block names none.
const DefaultKey = "id"

// ErrOption is wrapped by every error about a cursor block's options.
var ErrOption = errors.New("clickhouse: invalid option")

// Options are a cursor's parsed options. Table names may be qualified
// (db.table); unqualified names resolve in the credential's database.
type Options struct {
	// Table is the source table, one row per item, and the prefix of the
	// bookkeeping tables' default names. Required unless the cursor has a
	// claim template (then the claim is the source) and names the
	// claims, done and dead tables.
	Table string
	// Key is the column identifying a row; Row.Key is toString(key).
	// Defaults to DefaultKey ("id").
	Key string
	// Columns is the select list of the rows' values. Defaults to "*".
	Columns string
	// Where filters the source rows (a SQL condition). Defaults to none.
	Where string
	// OrderBy orders the candidates of a claim (a SQL expression over the
	// source's columns). Defaults to a hash of the key and the claim's
	// token: concurrent claimers then pick mostly different rows, which
	// matters because two claims of one row both lose (see the package
	// documentation). An explicit order makes concurrent claimers contend
	// for the same first rows.
	OrderBy string
	// ClaimsTable records claims, releases and withdrawals. Defaults to
	// Table + "_claims"; created if absent.
	ClaimsTable string
	// DoneTable records acknowledged keys. Defaults to Table + "_done";
	// created if absent.
	DoneTable string
	// DeadTable records dead-lettered keys. Defaults to Table + "_dead";
	// created if absent.
	DeadTable string
}

var (
	identRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	knownOpts = map[string]bool{
		OptURL: true, OptTable: true, OptKey: true, OptColumns: true, OptWhere: true,
		OptOrderBy: true, OptClaimsTable: true, OptDoneTable: true, OptDeadTable: true,
	}
)

// quoteName validates a (possibly qualified) table or column name and
// quotes its parts with backticks.
func quoteName(opt, name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w %s: %q, want name or database.name", ErrOption, opt, name)
	}
	for i, p := range parts {
		if !identRe.MatchString(p) {
			return "", fmt.Errorf("%w %s: %q is not a plain identifier", ErrOption, opt, name)
		}
		parts[i] = "`" + p + "`"
	}
	return strings.Join(parts, "."), nil
}

// tables are the quoted names a cursor works on.
type tables struct {
	src, key, claims, done, dead string
}

// ParseOptions reads a cursor block's options. Unknown keys are logged and
// ignored; a nil logger means slog.Default().
func ParseOptions(opts map[string]any, logger *slog.Logger) (Options, error) {
	if logger == nil {
		logger = slog.Default()
	}
	var unknown []string
	for k := range opts {
		if !knownOpts[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		logger.Warn("clickhouse: ignoring unknown cursor options", "options", unknown)
	}
	var o Options
	str := func(key, def string) (string, error) {
		v, ok := opts[key]
		if !ok || v == nil {
			return def, nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%w %s: %T, want a string", ErrOption, key, v)
		}
		return strings.TrimSpace(s), nil
	}
	var err error
	if o.Table, err = str(OptTable, ""); err != nil {
		return o, err
	}
	if o.Table == "" {
		// With a claim template the source is the claim; the bookkeeping
		// tables must then be named one by one.
		for _, k := range []string{OptClaimsTable, OptDoneTable, OptDeadTable} {
			if v, _ := opts[k].(string); strings.TrimSpace(v) == "" {
				return o, fmt.Errorf("%w %s: required (the source table, or the claims, done and dead tables with a claim)", ErrOption, OptTable)
			}
		}
	}
	for _, f := range []struct {
		dst       *string
		key, def  string
		mustIdent bool
	}{
		{&o.Key, OptKey, DefaultKey, true},
		{&o.Columns, OptColumns, "*", false},
		{&o.Where, OptWhere, "", false},
		{&o.OrderBy, OptOrderBy, "", false},
		{&o.ClaimsTable, OptClaimsTable, o.Table + "_claims", true},
		{&o.DoneTable, OptDoneTable, o.Table + "_done", true},
		{&o.DeadTable, OptDeadTable, o.Table + "_dead", true},
	} {
		if *f.dst, err = str(f.key, f.def); err != nil {
			return o, err
		}
		if *f.dst == "" && f.mustIdent {
			*f.dst = f.def
		}
	}
	if o.Columns == "" {
		o.Columns = "*"
	}
	if _, err := o.quoted(); err != nil {
		return o, err
	}
	return o, nil
}

func (o Options) quoted() (tables, error) {
	var t tables
	var err error
	if o.Table != "" {
		if t.src, err = quoteName(OptTable, o.Table); err != nil {
			return t, err
		}
	}
	for _, f := range []struct {
		dst       *string
		opt, name string
	}{
		{&t.key, OptKey, o.Key}, {&t.claims, OptClaimsTable, o.ClaimsTable},
		{&t.done, OptDoneTable, o.DoneTable}, {&t.dead, OptDeadTable, o.DeadTable},
	} {
		if *f.dst, err = quoteName(f.opt, f.name); err != nil {
			return t, err
		}
	}
	if strings.Contains(o.Key, ".") {
		return t, fmt.Errorf("%w %s: %q, want a column name", ErrOption, OptKey, o.Key)
	}
	seen := map[string]string{}
	if t.src != "" {
		seen[t.src] = OptTable
	}
	for _, p := range [][2]string{{OptClaimsTable, t.claims}, {OptDoneTable, t.done}, {OptDeadTable, t.dead}} {
		if other, ok := seen[p[1]]; ok {
			return t, fmt.Errorf("%w: %s and %s name the same table %s", ErrOption, other, p[0], p[1])
		}
		seen[p[1]] = p[0]
	}
	return t, nil
}
