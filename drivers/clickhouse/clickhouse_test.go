package clickhouse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   map[string]any
		want Options
		err  string
	}{
		{"defaults", map[string]any{"table": "jobs"},
			Options{Table: "jobs", Key: "id", Columns: "*", ClaimsTable: "jobs_claims", DoneTable: "jobs_done", DeadTable: "jobs_dead"}, ""},
		{"qualified", map[string]any{"table": "q.jobs", "key": "job_id", "columns": "job_id, body", "where": "day = today()", "order_by": "job_id"},
			Options{Table: "q.jobs", Key: "job_id", Columns: "job_id, body", Where: "day = today()", OrderBy: "job_id",
				ClaimsTable: "q.jobs_claims", DoneTable: "q.jobs_done", DeadTable: "q.jobs_dead"}, ""},
		{"claim only", map[string]any{"claims_table": "c", "done_table": "d", "dead_table": "x"},
			Options{Key: "id", Columns: "*", ClaimsTable: "c", DoneTable: "d", DeadTable: "x"}, ""},
		{"no table", map[string]any{}, Options{}, "required"},
		{"injection", map[string]any{"table": "jobs; DROP TABLE x"}, Options{}, "plain identifier"},
		{"three parts", map[string]any{"table": "a.b.c"}, Options{}, "database.name"},
		{"dotted key", map[string]any{"table": "jobs", "key": "a.b"}, Options{}, "column name"},
		{"same table", map[string]any{"table": "jobs", "done_table": "jobs"}, Options{}, "same table"},
		{"type", map[string]any{"table": 7}, Options{}, "want a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOptions(tc.in, nil)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrOption) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrOption mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"plain":   `'plain'`,
		"it's":    `'it\'s'`,
		`back\`:   `'back\\'`,
		`\'; --`:  `'\\\'; --'`,
		"":        `''`,
		"ünïcödé": `'ünïcödé'`,
	} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
	if got := list([]string{"a", "b'c"}); got != `['a', 'b\'c']` {
		t.Errorf("list = %s", got)
	}
}

func TestTokens(t *testing.T) {
	tok := newToken(1234567890123)
	at, err := tokenTime(tok)
	if err != nil || at != 1234567890123 {
		t.Fatalf("tokenTime(%q) = %d, %v", tok, at, err)
	}
	if a, b := newToken(1), newToken(1); a == b {
		t.Fatal("two tokens of the same millisecond are equal")
	}
	if newToken(9) >= newToken(10) {
		t.Fatal("tokens do not sort by time")
	}
	for _, bad := range []string{"", "x-y", "12", "-ab", "0-ab"} {
		if _, err := tokenTime(bad); err == nil {
			t.Errorf("tokenTime(%q) accepted", bad)
		}
	}
}

func TestConnLost(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{io.EOF, true},
		{errors.New("write tcp 127.0.0.1:1->127.0.0.1:2: write: broken pipe"), true},
		{errors.New("code: 60, message: Table test.x doesn't exist"), false},
	} {
		if got := connLost(tc.err); got != tc.want {
			t.Errorf("connLost(%v) = %v", tc.err, got)
		}
	}
}

func TestOpenRefusesBadCredential(t *testing.T) {
	d := New(Config{})
	defer d.Close()
	_, _, err := d.conn("clickhouse://user:s3cret@[::1")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("err = %v, want an error that does not quote the credential", err)
	}
}
