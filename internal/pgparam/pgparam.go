// Package pgparam encodes the values a playbook binds to a PostgreSQL
// statement's parameters ($1, $2, ...), for the postgres tool and the
// postgres cursor driver alike: each as text, typed by the server from
// the statement, so results decode exactly as without parameters.
package pgparam

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Encode returns the text form of each value: nil is NULL; strings are as
// they are; integers, floats and booleans their text; lists and maps their
// JSON (cast with $n::jsonb; Typed re-encodes a list the statement wants
// as an array). A string with a NUL byte is an error:
// PostgreSQL text cannot hold one.
func Encode(values []any) ([][]byte, error) {
	out := make([][]byte, len(values))
	for i, v := range values {
		if v == nil {
			continue // NULL
		}
		b, err := text(v, false)
		if err != nil {
			return nil, fmt.Errorf("$%d: %w", i+1, err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return nil, fmt.Errorf("$%d: PostgreSQL text cannot hold a NUL byte", i+1)
		}
		out[i] = b
	}
	return out, nil
}

// HasList reports whether values hold a list: a value the statement may
// type as an array (Typed).
func HasList(values []any) bool {
	for _, v := range values {
		if _, ok := v.([]any); ok {
			return true
		}
	}
	return false
}

// Typed asks the server how sql types its parameters (a Describe of the
// unnamed statement, one round trip, only when values hold a list) and
// re-encodes, in params (Encode's of values), each list whose parameter
// is an array type as that array's text form ({1,2,3}; a json[] or
// jsonb[] element as its JSON, a string too), so that
// `= ANY($1)` or `$1::int[]` takes a list as psycopg's users expect.
// A list bound where the statement wants json, jsonb, text or a type m
// does not know stays JSON. An error of the Describe is the statement's
// own (a syntax error, an unknown table), as its run would have said.
func Typed(ctx context.Context, c *pgconn.PgConn, m *pgtype.Map, sql string, values []any, params [][]byte) error {
	if !HasList(values) {
		return nil
	}
	sd, err := c.Prepare(ctx, "", sql, nil)
	if err != nil {
		return err
	}
	for i, v := range values {
		list, ok := v.([]any)
		if !ok || i >= len(sd.ParamOIDs) {
			continue
		}
		t, ok := m.TypeForOID(sd.ParamOIDs[i])
		if !ok {
			continue
		}
		ac, isArray := t.Codec.(*pgtype.ArrayCodec)
		if !isArray {
			continue
		}
		elem := uint32(0)
		if ac.ElementType != nil {
			elem = ac.ElementType.OID
		}
		b, err := appendArray(nil, list, elem == pgtype.JSONOID || elem == pgtype.JSONBOID)
		if err != nil {
			return fmt.Errorf("$%d: %w", i+1, err)
		}
		params[i] = b
	}
	return nil
}

// appendArray appends list in PostgreSQL's array text form: every
// element double-quoted (the server converts it to the element type),
// backslash and double quote escaped, nil as NULL, a nested list as a
// sub-array and a map as its JSON. With asJSON (json[], jsonb[]) every
// other element is its JSON too: a string's bare text is no JSON value.
func appendArray(b []byte, list []any, asJSON bool) ([]byte, error) {
	b = append(b, '{')
	for i, v := range list {
		if i > 0 {
			b = append(b, ',')
		}
		switch x := v.(type) {
		case nil:
			b = append(b, "NULL"...)
			continue
		case []any:
			var err error
			if b, err = appendArray(b, x, asJSON); err != nil {
				return nil, err
			}
			continue
		}
		t, err := text(v, asJSON)
		if err != nil {
			return nil, err
		}
		if bytes.IndexByte(t, 0) >= 0 {
			return nil, fmt.Errorf("element %d: PostgreSQL text cannot hold a NUL byte", i)
		}
		b = append(b, '"')
		for _, c := range t {
			if c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, c)
		}
		b = append(b, '"')
	}
	return append(b, '}'), nil
}

// text is a non-nil value's text: its JSON with asJSON, else a string as
// it is, a number or boolean its text, anything else its JSON.
func text(v any, asJSON bool) ([]byte, error) {
	if !asJSON {
		switch x := v.(type) {
		case string:
			return []byte(x), nil
		case bool:
			return strconv.AppendBool(nil, x), nil
		case int:
			return strconv.AppendInt(nil, int64(x), 10), nil
		case int64:
			return strconv.AppendInt(nil, x, 10), nil
		case float64:
			return strconv.AppendFloat(nil, x, 'g', -1, 64), nil
		}
	}
	return json.Marshal(v)
}
