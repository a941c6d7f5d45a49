package pgparam

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestTypedJSONArrayElements: a list bound where the statement wants
// json[] or jsonb[] goes as an array of its elements' JSON, strings and
// numbers included ("abc" as "\"abc\""): a string went as its bare text,
// which is no JSON, and the statement failed ('invalid input syntax for
// type json'), while a map beside it went as its JSON.
func TestTypedJSONArrayElements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, err := pgx.Connect(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx) })
	for _, tc := range []struct {
		sql  string
		list []any
		want string
	}{
		{"SELECT $1::jsonb[]::text", []any{"abc", map[string]any{"k": int64(1)}, nil, int64(2)},
			`{"\"abc\"","{\"k\": 1}",NULL,2}`},
		{"SELECT $1::json[]::text", []any{"a\"b", true}, `{"\"a\\\"b\"",true}`},
		// A nested list is a sub-array, for json[] as for any other.
		{"SELECT $1::jsonb[]::text", []any{[]any{"a", int64(1)}, []any{map[string]any{}, nil}}, `{{"\"a\"",1},{"{}",NULL}}`},
		// Other element types take a string as it is.
		{"SELECT $1::text[]::text", []any{"abc", "x y"}, `{abc,"x y"}`},
	} {
		values := []any{tc.list}
		params, err := Encode(values)
		if err != nil {
			t.Fatal(err)
		}
		if err := Typed(ctx, c.PgConn(), c.TypeMap(), tc.sql, values, params); err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		res := c.PgConn().ExecParams(ctx, tc.sql, params, nil, nil, nil).Read()
		switch {
		case res.Err != nil:
			t.Errorf("%s %q: %v", tc.sql, params[0], res.Err)
		case string(res.Rows[0][0]) != tc.want:
			t.Errorf("%s %q: %s, want %s", tc.sql, params[0], res.Rows[0][0], tc.want)
		}
	}
}
