package sqlquote

import (
	"encoding/json"
	"math"
	"testing"
)

func TestScalar(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v       any
		dialect string
		want    string
		wantErr bool
		notOK   bool
	}{
		{v: nil, dialect: Postgres, want: "NULL"},
		{v: true, dialect: Postgres, want: "TRUE"},
		{v: int64(-3), dialect: MySQL, want: "-3"},
		{v: uint64(1 << 63), dialect: SQLite, want: "9223372036854775808"},
		{v: json.Number("1.5e3"), dialect: Postgres, want: "1.5e3"},
		{v: 0.25, dialect: Postgres, want: "0.25"},
		{v: math.NaN(), dialect: Postgres, want: "'NaN'"},
		{v: math.Inf(-1), dialect: Postgres, want: "'-Infinity'"},
		{v: "O'Brien", dialect: Postgres, want: "'O''Brien'"},
		{v: `C:\temp\'x`, dialect: Postgres, want: `E'C:\\temp\\''x'`},
		{v: `C:\temp\'x`, dialect: MySQL, want: `'C:\\temp\\''x'`},
		{v: `C:\temp\'x`, dialect: SQLite, want: `'C:\temp\''x'`},
		{v: "$$ $tag$ naïve — 日本", dialect: Postgres, want: "'$$ $tag$ naïve — 日本'"},
		{v: "a\x00b", dialect: Postgres, wantErr: true},
		{v: "\xff", dialect: SQLite, wantErr: true},
		{v: []any{1}, dialect: Postgres, notOK: true},
		{v: map[string]any{}, dialect: Postgres, notOK: true},
	} {
		got, ok, err := Scalar(tc.v, tc.dialect)
		switch {
		case tc.notOK:
			if ok {
				t.Errorf("Scalar(%#v) took a non-scalar: %q", tc.v, got)
			}
		case tc.wantErr:
			if err == nil {
				t.Errorf("Scalar(%q, %s) = %q, want an error", tc.v, tc.dialect, got)
			}
		case err != nil || !ok || got != tc.want:
			t.Errorf("Scalar(%#v, %s) = %q, %v, %v; want %q", tc.v, tc.dialect, got, ok, err, tc.want)
		}
	}
}

func TestDialect(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"pg": Postgres, "PostgreSQL": Postgres, "mariadb": MySQL, "sqlite": SQLite, "clickhouse": ClickHouse} {
		if got, err := Dialect(in); err != nil || got != want {
			t.Errorf("Dialect(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Dialect("oracle"); err == nil {
		t.Error("Dialect(oracle) succeeded")
	}
}

// AppendString writes what String returns, or fails where it does.
func TestAppendString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "plain", "O'Brien", "''", "'", `\`, `C:\temp\'x`, `{"a": "it's", "b": "x\\y"}`,
		"$$ $tag$ naïve — 日本", "a\x00b", "\xff", "tail'", "'head", `\'\'`,
	} {
		for _, dialect := range []string{Postgres, MySQL, SQLite, ClickHouse} {
			want, wantErr := String(s, dialect)
			got, err := AppendString([]byte("x"), []byte(s), dialect)
			if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
				t.Errorf("AppendString(%q, %s): error %v, String's %v", s, dialect, err, wantErr)
				continue
			}
			if err == nil && string(got) != "x"+want {
				t.Errorf("AppendString(%q, %s) = %q, want %q", s, dialect, got, "x"+want)
			}
			if err != nil && string(got) != "x" {
				t.Errorf("AppendString(%q, %s) appended %q on an error", s, dialect, got)
			}
		}
	}
}
