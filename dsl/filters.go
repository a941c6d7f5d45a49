package dsl

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/internal/sqlquote"
)

// templateFilters returns the filters we add to gonja's builtins or use
// in place of them, where gonja's behaviour differs from Jinja2's in ways
// playbooks notice. Every other Jinja2 filter is gonja's builtin (join,
// list, abs, min, max, unique, sort, map, select, selectattr, reject,
// items, ...).
func templateFilters() map[string]exec.FilterFunction {
	return map[string]exec.FilterFunction{
		// int("12"), int("12.7"), int(True) and int(None) like Jinja2:
		// failures give the default (0).
		"int":   filterInt,
		"float": filterFloat,
		// default(value, boolean=false) with Jinja2's '' default value.
		"default": filterDefault,
		"d":       filterDefault,
		// tojson: sorted keys, Python separators, no HTML escaping.
		"tojson":  filterToJSON,
		"to_json": filterToJSON,
		// fromjson parses a JSON string; non-strings pass through.
		"fromjson":  filterFromJSON,
		"from_json": filterFromJSON,
		"b64encode": filterB64Encode,
		"b64decode": filterB64Decode,
		// String filters accept any input and stringify it (None as "").
		"replace": filterReplace,
		"lower":   stringFilter("lower", strings.ToLower),
		"upper":   stringFilter("upper", strings.ToUpper),
		"trim":    filterTrim,
		"string":  filterString,
		// first/last of an empty or undefined value are undefined.
		"first": filterFirst,
		"last":  filterLast,
		// length of undefined is 0.
		"length": filterLength,
		"count":  filterLength,
		// SQL-safe values: a quoted, escaped literal and a quoted
		// identifier, for values spliced into SQL text.
		"sql_literal": filterSQLLiteral,
		"sql_ident":   filterSQLIdent,
		// Python's /, // and % (jinja.go): the parser puts them in place
		// of gonja's operators.
		"_truediv":  filterTrueDiv,
		"_floordiv": filterFloorDiv,
		"_mod":      filterMod,
		"_sub":      filterSub,
		// Python's arithmetic and ordering (pyarith.go): bools count as
		// 0 and 1, a dict literal of the template sorts like any mapping,
		// round ties go to the even digit.
		"sum":      filterSum,
		"dictsort": filterDictSort,
		"round":    filterRound,
	}
}

// fail reports a filter failure; gonja prefixes the filter's name.
func fail(_ string, err error) *exec.Value {
	return exec.AsValue(err)
}

// arg returns positional argument i, else keyword argument name, else nil.
func arg(params *exec.VarArgs, i int, name string) *exec.Value {
	if params != nil {
		if i >= 0 && i < len(params.Args) {
			return params.Args[i]
		}
		if v, ok := params.KwArgs[name]; ok {
			return v
		}
	}
	return nil
}

// str stringifies v as Jinja's soft_str does, except None becomes "".
func str(v *exec.Value) string {
	if v == nil || v.IsNil() {
		return ""
	}
	return v.String()
}

func filterInt(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	def := arg(params, 0, "default")
	if def == nil {
		def = exec.AsValue(int64(0))
	}
	base := 10
	if b := arg(params, 1, "base"); b != nil {
		if !b.IsInteger() {
			return fail("int", errors.New("base must be an integer"))
		}
		base = b.Integer()
		if base != 0 && (base < 2 || base > 36) {
			return fail("int", fmt.Errorf("invalid base %d", base))
		}
	}
	n, ok := toInt64(in.Interface(), base)
	if !ok {
		return def
	}
	return exec.AsValue(n)
}

// toInt64 converts x as Jinja's int filter: ints, floats (truncated),
// bools, and strings holding an integer in base or any float.
func toInt64(x any, base int) (int64, bool) {
	p, err := plainOf(x, 0)
	if err != nil {
		return 0, false
	}
	switch v := p.(type) {
	case int64:
		return v, true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) || v >= math.MaxInt64 || v < math.MinInt64 {
			return 0, false
		}
		return int64(v), true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	case string:
		s := strings.ReplaceAll(strings.TrimSpace(v), "_", "")
		if s == "" {
			return 0, false
		}
		digits := s
		sign := ""
		if digits[0] == '-' || digits[0] == '+' {
			sign, digits = digits[:1], digits[1:]
		}
		lower := strings.ToLower(digits)
		switch {
		case (base == 16 || base == 0) && strings.HasPrefix(lower, "0x"):
			digits, base = digits[2:], 16
		case (base == 8 || base == 0) && strings.HasPrefix(lower, "0o"):
			digits, base = digits[2:], 8
		case (base == 2 || base == 0) && strings.HasPrefix(lower, "0b"):
			digits, base = digits[2:], 2
		case base == 0:
			base = 10
		}
		if n, err := strconv.ParseInt(sign+digits, base, 64); err == nil {
			return n, true
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return toInt64(f, 10)
		}
	}
	return 0, false
}

func filterFloat(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	def := arg(params, 0, "default")
	if def == nil {
		def = exec.AsValue(0.0)
	}
	p, err := plainOf(in.Interface(), 0)
	if err != nil {
		return def
	}
	switch v := p.(type) {
	case int64:
		return exec.AsValue(float64(v))
	case float64:
		return exec.AsValue(v)
	case bool:
		if v {
			return exec.AsValue(1.0)
		}
		return exec.AsValue(0.0)
	case string:
		if f, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(v), "_", ""), 64); err == nil {
			return exec.AsValue(f)
		}
	}
	return def
}

func filterDefault(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	def := arg(params, 0, "default_value")
	if def == nil {
		def = arg(params, -1, "value")
	}
	if def == nil {
		def = exec.AsValue("")
	}
	boolean := false
	if b := arg(params, 1, "boolean"); b != nil {
		boolean = b.IsTrue()
	}
	if in == nil || in.IsError() || in.IsNil() {
		return def
	}
	if boolean && !in.IsTrue() {
		return def
	}
	return in
}

func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	indent := 0
	if i := arg(params, 0, "indent"); i != nil && !i.IsNil() {
		if !i.IsInteger() {
			return fail("tojson", errors.New("indent must be an integer"))
		}
		indent = max(i.Integer(), 0)
	}
	p, err := toPlain(in)
	if err != nil {
		return fail("tojson", err)
	}
	s, err := marshalJSON(p, indent)
	if err != nil {
		return fail("tojson", err)
	}
	return exec.AsSafeValue(s)
}

func filterFromJSON(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if !in.IsString() {
		return in
	}
	s := strings.TrimSpace(in.String())
	if s == "" {
		return exec.AsValue(nil)
	}
	v, err := jsonnum.Decode([]byte(s))
	if err != nil {
		return fail("fromjson", err)
	}
	p, err := plainOf(v, 0)
	if err != nil {
		return fail("fromjson", err)
	}
	return exec.AsValue(p)
}

func filterB64Encode(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	return exec.AsValue(base64.StdEncoding.EncodeToString([]byte(str(in))))
}

func filterB64Decode(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	s := strings.TrimSpace(str(in))
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if !strings.HasSuffix(s, "=") && len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return fail("b64decode", err)
	}
	if !utf8.Valid(b) {
		return fail("b64decode", errors.New("decoded bytes are not UTF-8 text"))
	}
	return exec.AsValue(string(b))
}

func filterReplace(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	old, repl := arg(params, 0, "old"), arg(params, 1, "new")
	if old == nil || repl == nil {
		return fail("replace", errors.New("expected old and new arguments"))
	}
	count := -1
	if c := arg(params, 2, "count"); c != nil && !c.IsNil() {
		count = c.Integer()
	}
	return exec.AsValue(strings.Replace(str(in), str(old), str(repl), count))
}

func stringFilter(name string, fn func(string) string) exec.FilterFunction {
	return func(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
		if in.IsError() {
			return in
		}
		return exec.AsValue(fn(str(in)))
	}
}

func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if chars := arg(params, 0, "chars"); chars != nil && !chars.IsNil() {
		return exec.AsValue(strings.Trim(str(in), str(chars)))
	}
	return exec.AsValue(strings.TrimSpace(str(in)))
}

func filterString(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	return exec.AsValue(str(in))
}

func filterFirst(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	return pick("first", in, true)
}

func filterLast(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	return pick("last", in, false)
}

func pick(name string, in *exec.Value, first bool) *exec.Value {
	switch {
	case in.IsError():
		return in
	case in.IsNil():
		return exec.AsValue(nil)
	case in.IsString():
		r := []rune(in.String())
		if len(r) == 0 {
			return exec.AsValue(nil)
		}
		if first {
			return exec.AsValue(string(r[0]))
		}
		return exec.AsValue(string(r[len(r)-1]))
	case in.IsList():
		n := in.Len()
		if n == 0 {
			return exec.AsValue(nil)
		}
		if first {
			return in.Index(0)
		}
		return in.Index(n - 1)
	case in.IsDict():
		keys := in.Keys()
		if len(keys) == 0 {
			return exec.AsValue(nil)
		}
		if first {
			return keys[0]
		}
		return keys[len(keys)-1]
	}
	return fail(name, fmt.Errorf("%s is not a sequence", in.String()))
}

func filterLength(_ *exec.Evaluator, in *exec.Value, _ *exec.VarArgs) *exec.Value {
	switch {
	case in.IsError():
		return in
	case in.IsNil():
		return exec.AsValue(int64(0))
	case in.IsString(), in.IsList(), in.IsDict():
		return exec.AsValue(int64(in.Len()))
	}
	return fail("length", fmt.Errorf("object of type %T has no length", in.Interface()))
}

// sqlDialect reads the filter's dialect argument (default:
// defaultSQLDialect).
func sqlDialect(e *exec.Evaluator, name string, params *exec.VarArgs) (string, error) {
	d := arg(params, 0, "dialect")
	if d == nil || d.IsNil() {
		return defaultSQLDialect(e), nil
	}
	dialect, err := sqlquote.Dialect(str(d))
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return dialect, nil
}

// SQLDialectVar names the render variable that sets the dialect
// sql_literal and sql_ident quote for when a template names none: the SQL
// cursor drivers set it to their database's for their own statements, so
// a MySQL cursor's ack quotes a backslash as MySQL reads it. Without it
// the dialect is PostgreSQL's.
const SQLDialectVar = "__sql_dialect"

// defaultSQLDialect is the dialect SQLDialectVar names in the render's
// context, else PostgreSQL's.
func defaultSQLDialect(e *exec.Evaluator) string {
	if v, ok := renderVar(e, SQLDialectVar).(string); ok {
		if d, err := sqlquote.Dialect(v); err == nil {
			return d
		}
	}
	return sqlquote.Postgres
}

// filterSQLLiteral renders a value as an SQL literal: None as NULL,
// booleans as TRUE/FALSE, numbers as themselves (NaN and infinities
// quoted), strings quoted with every quote doubled, and lists and maps as
// their JSON text, quoted (so `{{ row | sql_literal }}::jsonb` works, as
// does `{{ row | tojson | sql_literal }}::jsonb`). A PostgreSQL string
// holding a backslash becomes an E'...' literal with the backslashes
// doubled, which reads the same whatever standard_conforming_strings says;
// for mysql and clickhouse, whose strings treat backslash as an escape,
// backslashes are doubled. A string with a NUL byte is an error: no
// dialect stores one in a text literal.
func filterSQLLiteral(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	dialect, err := sqlDialect(e, "sql_literal", params)
	if err != nil {
		return fail("sql_literal", err)
	}
	p, err := toPlain(in)
	if err != nil {
		return fail("sql_literal", err)
	}
	lit, ok, err := sqlquote.Scalar(p, dialect)
	if !ok {
		// Lists and maps: their JSON text, quoted.
		var text string
		if text, err = marshalJSON(p, 0); err == nil {
			lit, err = sqlquote.String(text, dialect)
		}
	}
	if err != nil {
		return fail("sql_literal", err)
	}
	return exec.AsSafeValue(lit)
}

// filterSQLIdent renders a value as a quoted SQL identifier: "name" with
// every double quote doubled (`name` with backticks doubled for mysql and
// clickhouse). A dotted name is one identifier: quote each part of a
// qualified name on its own ({{ s | sql_ident }}.{{ t | sql_ident }}).
func filterSQLIdent(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	dialect, err := sqlDialect(e, "sql_ident", params)
	if err != nil {
		return fail("sql_ident", err)
	}
	if in.IsNil() {
		return fail("sql_ident", errors.New("an identifier cannot be None"))
	}
	s := str(in)
	switch {
	case s == "":
		return fail("sql_ident", errors.New("an identifier cannot be empty"))
	case strings.IndexByte(s, 0) >= 0:
		return fail("sql_ident", errors.New("an identifier cannot hold a NUL byte"))
	case !utf8.ValidString(s):
		return fail("sql_ident", errors.New("an identifier must be valid UTF-8"))
	}
	if dialect == sqlquote.MySQL || dialect == sqlquote.ClickHouse {
		return exec.AsSafeValue("`" + strings.ReplaceAll(s, "`", "``") + "`")
	}
	return exec.AsSafeValue(`"` + strings.ReplaceAll(s, `"`, `""`) + `"`)
}
