package sqlcursor

import (
	"encoding/json"
	"math"
	"math/big"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/internal/sqlquote"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    map[string]any
		key     []string
		ack     string
		release string
		dead    string
		wantErr string
	}{
		{name: "empty", opts: nil},
		{name: "single key", opts: map[string]any{"key": "job_id"}, key: []string{"job_id"}},
		{name: "composite key string", opts: map[string]any{"key": " tenant , id "}, key: []string{"tenant", "id"}},
		{name: "composite key list", opts: map[string]any{"key": []any{"tenant", "id"}}, key: []string{"tenant", "id"}},
		{name: "key string slice", opts: map[string]any{"key": []string{"a"}}, key: []string{"a"}},
		{name: "nil key", opts: map[string]any{"key": nil}},
		{name: "statements", opts: map[string]any{
			"ack":         "UPDATE t SET done = true WHERE id IN ({{ keys | join(',') }})",
			"release":     "UPDATE t SET status = 'pending'",
			"dead_letter": "UPDATE t SET status = 'dead', reason = '{{ reason }}'",
		}, ack: "UPDATE t SET done = true WHERE id IN ({{ keys | join(',') }})",
			release: "UPDATE t SET status = 'pending'", dead: "UPDATE t SET status = 'dead', reason = '{{ reason }}'"},
		{name: "blank statement is unset", opts: map[string]any{"ack": "  "}},
		{name: "unknown keys ignored", opts: map[string]any{"table": "jobs"}},
		{name: "key not a string", opts: map[string]any{"key": 3}, wantErr: `option "key" is int`},
		{name: "key list element", opts: map[string]any{"key": []any{"a", 1}}, wantErr: "element 1 is int"},
		{name: "empty key column", opts: map[string]any{"key": "a,,b"}, wantErr: "empty column name"},
		{name: "statement not a string", opts: map[string]any{"ack": 42}, wantErr: `option "ack" is int`},
		{name: "bad template", opts: map[string]any{"release": "UPDATE {{ keys "}, wantErr: `option "release"`},
		{name: "statement with params", opts: map[string]any{"ack": map[string]any{"sql": "UPDATE t SET done = true WHERE id = ANY($1)", "params": []any{"{{ keys }}"}}},
			ack: "UPDATE t SET done = true WHERE id = ANY($1)"},
		{name: "statement with an unknown key", opts: map[string]any{"ack": map[string]any{"sql": "x", "args": []any{}}}, wantErr: `unknown key "args"`},
		{name: "params not a list", opts: map[string]any{"claim_params": "x"}, wantErr: `option "claim_params" is string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseOptions(tt.opts, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.Key, tt.key) {
				t.Errorf("Key = %#v, want %#v", o.Key, tt.key)
			}
			for _, c := range []struct {
				name string
				got  *Statement
				src  string
			}{{"ack", o.Ack, tt.ack}, {"release", o.Release, tt.release}, {"dead_letter", o.DeadLetter, tt.dead}} {
				if (c.got == nil) != (c.src == "") {
					t.Errorf("%s set = %v, want %v", c.name, c.got != nil, c.src != "")
				}
			}
			if o.Ack != nil && o.Ack.SQL.Source != tt.ack {
				t.Errorf("Ack source = %q", o.Ack.SQL.Source)
			}
		})
	}
}

func TestAckTemplateRendersKeysAndRows(t *testing.T) {
	o, err := ParseOptions(map[string]any{
		"ack": "UPDATE {{ workload.table }} SET done = true WHERE id IN ({{ keys | join(', ') }}) -- {{ rows[1].name }}",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := cursor.Spec{Scope: map[string]any{"workload": map[string]any{"table": "jobs"}}}
	got, err := o.Ack.SQL.RenderString(Vars(spec, rowsFor("7", "9"), ""))
	if err != nil {
		t.Fatal(err)
	}
	if want := "UPDATE jobs SET done = true WHERE id IN (7, 9) -- row 9"; got != want {
		t.Fatalf("rendered %q, want %q", got, want)
	}
}

func TestRenderParams(t *testing.T) {
	o, err := ParseOptions(map[string]any{"claim_params": []any{"{{ __frame_max_rows }}", "{{ rows }}", "it's", int64(3), nil}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := RenderParams(o.ClaimParams, map[string]any{"__frame_max_rows": 5, "rows": []any{map[string]any{"id": int64(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{int64(5), `[{"id":1}]`, "it's", int64(3), nil}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	if got, _ := RenderParams(nil, nil); got != nil {
		t.Fatalf("no params rendered to %#v", got)
	}
}

// TestNormalizeKeepsTextUnboxed checks that a text value, the common
// column of a claimed row, comes back without an allocation: every text
// column of every row goes through Normalize.
func TestNormalizeKeepsTextUnboxed(t *testing.T) {
	var v any = "payload-1"
	if n := testing.AllocsPerRun(100, func() { _ = Normalize(v) }); n != 0 {
		t.Errorf("Normalize of a string: %v allocations, want 0", n)
	}
}

func TestNormalize(t *testing.T) {
	ts := time.Date(2024, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600))
	type myInts []int32
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"nil", nil, nil},
		{"int", 3, int64(3)},
		{"int8", int8(-3), int64(-3)},
		{"int16", int16(300), int64(300)},
		{"int32", int32(-70000), int64(-70000)},
		{"uint8", uint8(200), int64(200)},
		{"uint32", uint32(4000000000), int64(4000000000)},
		{"uint64 small", uint64(5), int64(5)},
		{"uint64 huge", uint64(math.MaxUint64), "18446744073709551615"},
		{"float32", float32(1.5), float64(1.5)},
		{"float64", 2.25, 2.25},
		{"bool", true, true},
		{"string not UTF-8", "a\xffb", "Yf9i"},
		{"string", "héllo", "héllo"},
		{"time is UTC RFC3339", ts, "2024-01-02T02:04:05.0000006Z"},
		{"utf8 bytes", []byte("abc"), "abc"},
		{"binary bytes", []byte{0xff, 0x00}, "/wA="},
		{"raw json", json.RawMessage(`{"a":[1,"x",2.5],"id":18446744073709551615}`), map[string]any{"a": []any{int64(1), "x", 2.5}, "id": "18446744073709551615"}},
		{"big int", big.NewInt(42), int64(42)},
		{"nested", map[string]any{"a": []any{int32(1), ts}}, map[string]any{"a": []any{int64(1), "2024-01-02T02:04:05.0000006Z"}}},
		{"typed slice", myInts{1, 2}, []any{int64(1), int64(2)}},
		{"typed map", map[string]int16{"x": 1}, map[string]any{"x": int64(1)}},
		{"stringer", netip.MustParsePrefix("10.0.0.0/8"), "10.0.0.0/8"},
		{"nil pointer", (*int)(nil), nil},
		{"pointer", func() *int { v := 7; return &v }(), int64(7)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Normalize(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Normalize(%#v) = %#v (%T), want %#v (%T)", tt.in, got, got, tt.want, tt.want)
			}
		})
	}
}

func TestKeyString(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{nil, ""},
		{"abc", "abc"},
		{int64(-12), "-12"},
		{float64(1.5), "1.5"},
		{float64(1e21), "1000000000000000000000"},
		{true, "true"},
		{map[string]any{"a": int64(1)}, `{"a":1}`},
		{[]any{"x", int64(2)}, `["x",2]`},
	}
	for _, tt := range tests {
		if got := KeyString(tt.in); got != tt.want {
			t.Errorf("KeyString(%#v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestKeyColumnsAndRowKey(t *testing.T) {
	tests := []struct {
		name    string
		columns []string
		key     []string
		vals    []any
		want    string
		wantErr string
	}{
		{"id by default", []string{"payload", "id"}, nil, []any{"p", int64(7)}, "7", ""},
		{"ID case-insensitive", []string{"payload", "ID"}, nil, []any{"p", int64(8)}, "8", ""},
		{"first column without id", []string{"job", "payload"}, nil, []any{"j-1", "p"}, "j-1", ""},
		{"configured key", []string{"id", "uuid"}, []string{"uuid"}, []any{int64(1), "u-1"}, "u-1", ""},
		{"composite", []string{"id", "tenant"}, []string{"tenant", "id"}, []any{int64(3), "acme"}, "acme/3", ""},
		{"null key part", []string{"a", "b"}, []string{"a", "b"}, []any{nil, int64(2)}, "/2", ""},
		// A part holding "/" escapes every part ("%" as %25, "/" as %2F)
		// behind a leading "/": ("a/b", "c") and ("a", "b/c") no longer
		// share the key a/b/c. Keys without "/" are the plain join.
		{"slash in first part", []string{"a", "b"}, []string{"a", "b"}, []any{"a/b", "c"}, "/a%2Fb/c", ""},
		{"slash in last part", []string{"a", "b"}, []string{"a", "b"}, []any{"a", "b/c"}, "/a/b%2Fc", ""},
		{"percent without slash", []string{"a", "b"}, []string{"a", "b"}, []any{"50%", "a%2Fb"}, "50%/a%2Fb", ""},
		{"percent with slash", []string{"a", "b"}, []string{"a", "b"}, []any{"/a%2Fb", "c"}, "/%2Fa%252Fb/c", ""},
		{"single key keeps its slash", []string{"id"}, nil, []any{"a/b"}, "a/b", ""},
		{"missing key", []string{"id"}, []string{"uuid"}, nil, "", `key column "uuid" is not among`},
		{"no columns", nil, nil, nil, "", "no columns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx, err := KeyColumns(tt.columns, tt.key)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := RowKey(tt.vals, idx); got != tt.want {
				t.Fatalf("RowKey = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRowKeyUnambiguous checks that composite keys of different values
// differ, over parts built of the characters the escaping is about.
func TestRowKeyUnambiguous(t *testing.T) {
	parts := []string{"", "a", "/", "//", "%", "%2F", "%25", "a/b", "/a%2Fb", "%2F/"}
	for _, n := range []int{2, 3} {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		seen := map[string][]any{}
		var walk func(vals []any)
		walk = func(vals []any) {
			if len(vals) == n {
				k := RowKey(vals, idx)
				if prev, ok := seen[k]; ok {
					t.Fatalf("RowKey(%q) = RowKey(%q) = %q", prev, vals, k)
				}
				seen[k] = slices.Clone(vals)
				return
			}
			for _, p := range parts {
				walk(append(vals, p))
			}
		}
		walk(nil)
	}
}

func TestNullKey(t *testing.T) {
	for _, tt := range []struct {
		vals []any
		idx  []int
		want int
	}{
		{[]any{int64(1), nil}, []int{0}, -1},
		{[]any{nil, "p"}, []int{0}, 0},
		{[]any{"acme", nil, "p"}, []int{0, 1}, 1},
		{[]any{"", int64(0)}, []int{0, 1}, -1}, // empty and zero are keys
	} {
		if got := NullKey(tt.vals, tt.idx); got != tt.want {
			t.Errorf("NullKey(%v, %v) = %d, want %d", tt.vals, tt.idx, got, tt.want)
		}
	}
}

func TestAttempts(t *testing.T) {
	cols := []struct {
		columns []string
		want    int
	}{
		{[]string{"id", "attempts"}, 1},
		{[]string{"id", "Attempt"}, 1},
		{[]string{"attempt_count", "id"}, 0},
		{[]string{"attempt", "attempts"}, 1}, // attempts wins
		{[]string{"id", "tries"}, -1},
	}
	for _, c := range cols {
		if got := AttemptColumn(c.columns); got != c.want {
			t.Errorf("AttemptColumn(%v) = %d, want %d", c.columns, got, c.want)
		}
	}
	vals := []struct {
		in      any
		want    int
		wantErr bool
	}{
		{int64(3), 3, false},
		{float64(2), 2, false},
		{" 4 ", 4, false},
		{nil, 0, false},
		{2.5, 0, true},
		{"x", 0, true},
		{true, 0, true},
	}
	for _, v := range vals {
		got, err := attemptValue(v.in)
		if (err != nil) != v.wantErr || got != v.want {
			t.Errorf("attemptValue(%#v) = %d, %v; want %d, error %v", v.in, got, err, v.want, v.wantErr)
		}
	}
}

func TestRowsSplitsPoison(t *testing.T) {
	o, err := ParseOptions(map[string]any{"dead_letter": "UPDATE t SET dead = true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := Result{
		Columns: []string{"id", "attempts"},
		Rows:    [][]any{{int64(1), int64(1)}, {int64(2), int64(4)}, {int64(3), nil}, {int64(4), int64(3)}},
	}
	tests := []struct {
		name       string
		opts       Options
		max        int
		live, dead []string
		attempts   []int
	}{
		{"dead letter past max", o, 3, []string{"1", "3", "4"}, []string{"2"}, []int{1, 1, 3}},
		{"no max attempts", o, 0, []string{"1", "2", "3", "4"}, nil, []int{1, 4, 1, 3}},
		{"no dead_letter statement", Options{}, 3, []string{"1", "2", "3", "4"}, nil, []int{1, 4, 1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Cursor{opts: tt.opts}
			c.spec.MaxAttempts = tt.max
			live, dead, err := c.rows(res)
			if err != nil {
				t.Fatal(err)
			}
			var lk, dk []string
			var att []int
			for _, r := range live {
				lk = append(lk, r.Key)
				att = append(att, r.Lease.Attempt)
				if r.Values["id"] == nil {
					t.Errorf("row %s lost its values", r.Key)
				}
			}
			for _, r := range dead {
				dk = append(dk, r.Key)
			}
			if !reflect.DeepEqual(lk, tt.live) || !reflect.DeepEqual(dk, tt.dead) || !reflect.DeepEqual(att, tt.attempts) {
				t.Fatalf("live %v (attempts %v), dead %v; want %v (%v), %v", lk, att, dk, tt.live, tt.attempts, tt.dead)
			}
		})
	}
	c := &Cursor{}
	if _, _, err := c.rows(Result{}); err == nil || !strings.Contains(err.Error(), "no result set") {
		t.Fatalf("a claim without a result set: err = %v", err)
	}
	if _, _, err := c.rows(Result{Columns: []string{"id", "attempts"}, Rows: [][]any{{int64(1), "many"}}}); err == nil {
		t.Fatal("a non-numeric attempts column was accepted")
	}
}

func rowsFor(keys ...string) []cursor.Row {
	out := make([]cursor.Row, len(keys))
	for i, k := range keys {
		out[i] = cursor.Row{Key: k, Values: map[string]any{"id": k, "name": "row " + k}}
	}
	return out
}

func TestFillParams(t *testing.T) {
	vars := map[string]any{
		"__worker_slot_id": int64(4503599627370497), "__frame_max_rows": 50, "name": "O'Brien \\ co",
		"none": nil, "ok": true, "ratio": 0.25, "keys": []any{int64(3), "x'y"}, "empty": []any{},
		"doc": map[string]any{"a": "b"}, "inf": math.Inf(1),
	}
	tests := []struct {
		name, in, want, wantErr string
		dialect                 string
	}{
		{name: "noetl claim", in: "SET worker_id = %(__worker_slot_id)s LIMIT %(__frame_max_rows)s",
			want: "SET worker_id = 4503599627370497 LIMIT 50"},
		{name: "string quoted", in: "WHERE owner = %(name)s", want: `WHERE owner = E'O''Brien \\ co'`},
		{name: "sqlite quoting", in: "WHERE owner = %(name)s", want: `WHERE owner = 'O''Brien \ co'`, dialect: sqlquote.SQLite},
		{name: "mysql quoting", in: "WHERE owner = %(name)s", want: `WHERE owner = 'O''Brien \\ co'`, dialect: sqlquote.MySQL},
		{name: "null bool float", in: "%(none)s, %(ok)s, %(ratio)s, %(inf)s", want: "NULL, TRUE, 0.25, 'Infinity'"},
		{name: "list as tuple", in: "id IN %(keys)s", want: "id IN (3, 'x''y')"},
		{name: "empty list", in: "id IN %(empty)s", want: "id IN (NULL)"},
		{name: "map as json", in: "%(doc)s::jsonb", want: `'{"a":"b"}'::jsonb`},
		{name: "percent escaped with placeholders", in: "name LIKE 'a%%' AND id = %(ok)s", want: "name LIKE 'a%' AND id = TRUE"},
		{name: "percent kept without placeholders", in: "name LIKE 'a%%' AND b LIKE '%'", want: "name LIKE 'a%%' AND b LIKE '%'"},
		{name: "escaped placeholder is text", in: "'%%(name)s' = %(ok)s", want: "'%(name)s' = TRUE"},
		{name: "lone percent kept", in: "x % 2 = 0 AND id = %(ok)s", want: "x % 2 = 0 AND id = TRUE"},
		{name: "not a placeholder", in: "%(name)d and %(bad-name)s", want: "%(name)d and %(bad-name)s"},
		{name: "unknown name", in: "id = %(nope)s", wantErr: `placeholder %(nope)s: no variable "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.dialect
			if d == "" {
				d = sqlquote.Postgres
			}
			got, err := FillParams(tt.in, vars, d)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("FillParams(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestSlotVars(t *testing.T) {
	vars := map[string]any{}
	SlotVars(vars, cursor.Spec{SlotID: 2, WorkerSlotID: 99})
	if vars["__worker_slot_id"] != int64(99) || vars["__worker_slot_index"] != 2 {
		t.Fatalf("vars = %v", vars)
	}
	SlotVars(vars, cursor.Spec{SlotID: 3})
	if vars["__worker_slot_id"] != int64(3) {
		t.Fatalf("without a WorkerSlotID, __worker_slot_id = %v, want the slot index 3", vars["__worker_slot_id"])
	}
}
