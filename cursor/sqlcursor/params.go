package sqlcursor

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/cursorflow/cursorflow/internal/sqlquote"
)

// FillParams fills NoETL's psycopg-style placeholders in a rendered
// statement, as psycopg2 does on the client: each %(name)s becomes the
// value of vars[name] as a SQL literal, and %% becomes %. A statement
// without any %(name)s placeholder is returned unchanged, %% included (as
// psycopg leaves a statement executed without parameters alone). dialect
// is the database's (Executor.Dialect): postgres, mysql, sqlite or
// clickhouse.
//
// Literals are those of the sql_literal template filter — nil is NULL;
// booleans TRUE or FALSE; numbers their decimal form (non-finite floats
// the quoted strings 'NaN', 'Infinity' and '-Infinity'); strings quoted
// for the dialect; maps their JSON text, quoted — except lists, which
// become a parenthesised list of their elements' literals (psycopg's
// tuple form, for IN %(keys)s; an empty list is (NULL), which matches
// nothing). A name that vars lacks is an error naming it.
func FillParams(stmt string, vars map[string]any, dialect string) (string, error) {
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
		lit, err := Literal(v, dialect)
		if err != nil {
			return "", fmt.Errorf("placeholder %%(%s)s: %w", name, err)
		}
		b.WriteString(lit)
		i += n
	}
	return b.String(), nil
}

// Placeholders returns the names of stmt's %(name)s placeholders, in
// order, as FillParams reads them (%% escapes a percent sign).
func Placeholders(stmt string) []string {
	var names []string
	eachParam(stmt, func(name string) bool {
		names = append(names, name)
		return true
	})
	return names
}

// hasParams reports whether stmt holds a %(name)s placeholder outside a
// %% escape.
func hasParams(stmt string) bool {
	found := false
	eachParam(stmt, func(string) bool {
		found = true
		return false
	})
	return found
}

// eachParam calls fn with the name of each %(name)s placeholder of stmt
// outside a %% escape, until fn returns false.
func eachParam(stmt string, fn func(name string) bool) {
	for i := 0; i < len(stmt); i++ {
		switch {
		case stmt[i] != '%':
		case strings.HasPrefix(stmt[i:], "%%"):
			i++
		default:
			if name, n := param(stmt[i:]); n > 0 {
				if !fn(name) {
					return
				}
				i += n - 1
			}
		}
	}
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

// Literal returns v as a SQL literal of dialect, the way FillParams
// writes it.
func Literal(v any, dialect string) (string, error) {
	switch v := v.(type) {
	case []any:
		if len(v) == 0 {
			return "(NULL)", nil
		}
		parts := make([]string, len(v))
		for i, e := range v {
			lit, err := Literal(e, dialect)
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
		return Literal(list, dialect)
	case map[string]any:
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("encode map as JSON: %w", err)
		}
		return sqlquote.String(string(b), dialect)
	}
	if lit, ok, err := sqlquote.Scalar(v, dialect); ok {
		return lit, err
	}
	return sqlquote.String(fmt.Sprint(v), dialect)
}
