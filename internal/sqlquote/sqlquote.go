// Package sqlquote writes values as SQL literals of a dialect. It is the
// one place the project splices a value into SQL text: the sql_literal
// template filter (package dsl) and the psycopg-style %(name)s
// placeholders of SQL cursors (package sqlcursor) both go through it.
// Where a value can be bound instead, bind it.
package sqlquote

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Dialects.
const (
	Postgres   = "postgres"
	SQLite     = "sqlite"
	MySQL      = "mysql"
	ClickHouse = "clickhouse"
)

// Dialect returns the dialect a name stands for: postgres (also
// postgresql, pg), sqlite, mysql (also mariadb) or clickhouse.
func Dialect(name string) (string, error) {
	switch s := strings.ToLower(name); s {
	case Postgres, "postgresql", "pg":
		return Postgres, nil
	case SQLite, MySQL, ClickHouse:
		return s, nil
	case "mariadb":
		return MySQL, nil
	default:
		return "", fmt.Errorf("unknown dialect %q (postgres, sqlite, mysql, clickhouse)", name)
	}
}

var (
	errNUL     = errors.New("a string with a NUL byte cannot be an SQL literal")
	errNotUTF8 = errors.New("a string that is not valid UTF-8 cannot be an SQL literal")
)

// String returns s as a string literal of dialect: in single quotes, each
// single quote doubled. A PostgreSQL string holding a backslash becomes an
// E'...' literal with the backslashes doubled, which reads the same
// whatever standard_conforming_strings says; MySQL and ClickHouse, whose
// strings treat a backslash as an escape, get it doubled; SQLite strings
// have no escapes. A string with a NUL byte, or that is not valid UTF-8,
// is an error: no dialect stores one in a text literal.
func String(s, dialect string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", errNUL
	}
	if !utf8.ValidString(s) {
		return "", errNotUTF8
	}
	quoted := strings.ReplaceAll(s, "'", "''")
	if dialect == SQLite || !strings.Contains(s, `\`) {
		return "'" + quoted + "'", nil
	}
	quoted = strings.ReplaceAll(quoted, `\`, `\\`)
	if dialect == Postgres {
		return "E'" + quoted + "'", nil
	}
	return "'" + quoted + "'", nil
}

// AppendString appends String(string(s), dialect) to dst (nothing on an
// error), without the copies of s that String makes on the way.
func AppendString(dst, s []byte, dialect string) ([]byte, error) {
	if bytes.IndexByte(s, 0) >= 0 {
		return dst, errNUL
	}
	if !utf8.Valid(s) {
		return dst, errNotUTF8
	}
	backslash := dialect != SQLite && bytes.IndexByte(s, '\\') >= 0
	if backslash && dialect == Postgres {
		dst = append(dst, 'E')
	}
	dst = append(dst, '\'')
	if !backslash {
		// Runs between quotes, found by IndexByte, go in at once.
		for {
			i := bytes.IndexByte(s, '\'')
			if i < 0 {
				break
			}
			dst = append(dst, s[:i+1]...)
			dst = append(dst, '\'')
			s = s[i+1:]
		}
		dst = append(dst, s...)
		return append(dst, '\''), nil
	}
	start := 0
	for i, c := range s {
		if c == '\'' || c == '\\' {
			dst = append(dst, s[start:i+1]...)
			dst = append(dst, c)
			start = i + 1
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, '\''), nil
}

// Scalar returns v as a literal of dialect when v is a scalar: nil as
// NULL, booleans as TRUE or FALSE, numbers in decimal (NaN and the
// infinities as the quoted strings 'NaN', 'Infinity' and '-Infinity'),
// strings quoted (String). ok is false for any other value (lists, maps),
// which callers encode their own way.
func Scalar(v any, dialect string) (lit string, ok bool, err error) {
	switch v := v.(type) {
	case nil:
		return "NULL", true, nil
	case bool:
		if v {
			return "TRUE", true, nil
		}
		return "FALSE", true, nil
	case string:
		lit, err := String(v, dialect)
		return lit, true, err
	case int:
		return strconv.Itoa(v), true, nil
	case int32:
		return strconv.FormatInt(int64(v), 10), true, nil
	case int64:
		return strconv.FormatInt(v, 10), true, nil
	case uint64:
		return strconv.FormatUint(v, 10), true, nil
	case json.Number:
		return v.String(), true, nil
	case float32:
		return float(float64(v), dialect)
	case float64:
		return float(v, dialect)
	}
	return "", false, nil
}

func float(f float64, dialect string) (string, bool, error) {
	switch {
	case math.IsNaN(f):
		lit, err := String("NaN", dialect)
		return lit, true, err
	case math.IsInf(f, 1):
		lit, err := String("Infinity", dialect)
		return lit, true, err
	case math.IsInf(f, -1):
		lit, err := String("-Infinity", dialect)
		return lit, true, err
	}
	return strconv.FormatFloat(f, 'g', -1, 64), true, nil
}
