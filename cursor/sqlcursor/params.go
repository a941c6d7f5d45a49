package sqlcursor

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// FillParams fills NoETL's psycopg-style placeholders in a rendered
// statement, as psycopg2 does on the client: each %(name)s becomes the
// value of vars[name] as a SQL literal, and %% becomes %. A statement
// without any %(name)s placeholder is returned unchanged, %% included (as
// psycopg leaves a statement executed without parameters alone). quote
// turns a string into a string literal of the database's dialect
// (Executor.Quote).
//
// Literals: nil is NULL; booleans TRUE or FALSE; numbers their decimal
// form (non-finite floats the quoted strings 'NaN', 'Infinity' and
// '-Infinity'); strings quoted; lists a parenthesised list of their
// elements' literals (psycopg's tuple form, for IN %(keys)s; an empty
// list is (NULL), which matches nothing); maps their JSON text, quoted. A
// name that vars lacks is an error naming it.
func FillParams(stmt string, vars map[string]any, quote func(string) string) (string, error) {
	if !hasParams(stmt) {
		return stmt, nil
	}
	var b strings.Builder
	b.Grow(len(stmt))
	for i := 0; i < len(stmt); {
		if stmt[i] != '%' {
			b.WriteByte(stmt[i])
			i++
			continue
		}
		if strings.HasPrefix(stmt[i:], "%%") {
			b.WriteByte('%')
			i += 2
			continue
		}
		name, n := param(stmt[i:])
		if n == 0 {
			b.WriteByte('%')
			i++
			continue
		}
		v, ok := vars[name]
		if !ok {
			return "", fmt.Errorf("placeholder %%(%s)s: no variable %q (known: %s)", name, name, knownNames(vars))
		}
		lit, err := Literal(v, quote)
		if err != nil {
			return "", fmt.Errorf("placeholder %%(%s)s: %w", name, err)
		}
		b.WriteString(lit)
		i += n
	}
	return b.String(), nil
}

// hasParams reports whether stmt holds a %(name)s placeholder outside a
// %% escape.
func hasParams(stmt string) bool {
	for i := 0; i < len(stmt); i++ {
		switch {
		case stmt[i] != '%':
		case strings.HasPrefix(stmt[i:], "%%"):
			i++
		default:
			if _, n := param(stmt[i:]); n > 0 {
				return true
			}
		}
	}
	return false
}

// param parses "%(name)s" at the start of s and returns the name and the
// placeholder's length, or a zero length.
func param(s string) (string, int) {
	if !strings.HasPrefix(s, "%(") {
		return "", 0
	}
	end := strings.IndexByte(s, ')')
	if end < 3 || end+1 >= len(s) || s[end+1] != 's' {
		return "", 0
	}
	name := s[2:end]
	for i, r := range name {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		digit := i > 0 && r >= '0' && r <= '9'
		if !letter && !digit {
			return "", 0
		}
	}
	return name, end + 2
}

func knownNames(vars map[string]any) string {
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) > 12 {
		names = append(names[:12], "...")
	}
	return strings.Join(names, ", ")
}

// Literal returns v as a SQL literal, the way FillParams writes it.
func Literal(v any, quote func(string) string) (string, error) {
	switch v := v.(type) {
	case nil:
		return "NULL", nil
	case bool:
		if v {
			return "TRUE", nil
		}
		return "FALSE", nil
	case string:
		return quote(v), nil
	case int:
		return strconv.Itoa(v), nil
	case int32:
		return strconv.FormatInt(int64(v), 10), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float32:
		return floatLiteral(float64(v), quote), nil
	case float64:
		return floatLiteral(v, quote), nil
	case json.Number:
		return v.String(), nil
	case []any:
		if len(v) == 0 {
			return "(NULL)", nil
		}
		parts := make([]string, len(v))
		for i, e := range v {
			lit, err := Literal(e, quote)
			if err != nil {
				return "", err
			}
			parts[i] = lit
		}
		return "(" + strings.Join(parts, ", ") + ")", nil
	case []string:
		list := make([]any, len(v))
		for i, s := range v {
			list[i] = s
		}
		return Literal(list, quote)
	case map[string]any:
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("encode map as JSON: %w", err)
		}
		return quote(string(b)), nil
	}
	return quote(fmt.Sprint(v)), nil
}

func floatLiteral(f float64, quote func(string) string) string {
	switch {
	case math.IsNaN(f):
		return quote("NaN")
	case math.IsInf(f, 1):
		return quote("Infinity")
	case math.IsInf(f, -1):
		return quote("-Infinity")
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// QuoteStandard returns s as a standard SQL string literal: in single
// quotes, each single quote doubled. It is the quoting of PostgreSQL (with
// standard_conforming_strings, the default) and SQLite.
func QuoteStandard(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// QuoteBackslash returns s as a string literal for databases that treat a
// backslash in a literal as an escape (MySQL and MariaDB unless
// NO_BACKSLASH_ESCAPES is set): backslashes are doubled, then single
// quotes.
func QuoteBackslash(s string) string {
	return QuoteStandard(strings.ReplaceAll(s, `\`, `\\`))
}
