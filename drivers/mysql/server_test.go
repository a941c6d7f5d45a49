package mysql_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/mysql"
	"github.com/cursorflow/cursorflow/dsl"
)

func compile(t *testing.T, src string) *dsl.Template {
	t.Helper()
	tmpl, err := dsl.CompileTemplate(src, dsl.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestValues checks how column types reach Row.Values on the server.
func TestValues(t *testing.T) {
	h := newHarness(t, mysql.Config{})
	name, cred := h.newDatabase(t, 0)
	ctx := context.Background()
	_, err := h.admin.ExecContext(ctx, `CREATE TABLE `+name+`.v (
		id int PRIMARY KEY, d decimal(10,2), di decimal(10,0), f float, b bit(9), bin varbinary(4),
		txt text, dt datetime(6), j json, n int NULL);
		INSERT INTO `+name+`.v VALUES (1, 12.50, 42, 0.1, b'100000001', x'ff00', 'héllo',
		'2024-05-06 07:08:09.123456', '{"a": [1, 2.5]}', NULL)`)
	if err != nil {
		t.Fatal(err)
	}
	spec := cursor.Spec{Kind: "mysql", Credential: cred, Claim: compile(t, `SELECT * FROM v LIMIT {{ __frame_max_rows }}`)}
	cur, err := h.drv.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	rows, err := cursortest.ClaimCommitted(ctx, cur, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("got %d rows", len(rows))
	}
	v := rows[0].Values
	want := map[string]any{
		"id": int64(1), "d": 12.5, "di": int64(42), "f": 0.1, "b": int64(257), "bin": "/wA=",
		"txt": "héllo", "dt": "2024-05-06T07:08:09.123456Z", "n": nil,
	}
	for k, w := range want {
		if !reflect.DeepEqual(v[k], w) {
			t.Errorf("column %s = %#v (%T), want %#v (%T)", k, v[k], v[k], w, w)
		}
	}
	// MariaDB's JSON is LONGTEXT (a string); MySQL's is decoded.
	switch j := v["j"].(type) {
	case string:
		if !strings.Contains(j, `"a"`) {
			t.Errorf("json column = %q", j)
		}
	case map[string]any:
		if !reflect.DeepEqual(j, map[string]any{"a": []any{int64(1), 2.5}}) {
			t.Errorf("json column = %#v", j)
		}
	default:
		t.Errorf("json column is %T", j)
	}
	if rows[0].Key != "1" || rows[0].Lease.Attempt != 1 {
		t.Errorf("key %q attempt %d", rows[0].Key, rows[0].Lease.Attempt)
	}
}

// TestMarkIsInTheClaimTransaction: a failing mark rolls the claim back,
// so its rows stay unclaimed and unlocked; composite keys reach the mark.
func TestMarkIsInTheClaimTransaction(t *testing.T) {
	h := newHarness(t, mysql.Config{})
	name, cred := h.newDatabase(t, 0)
	ctx := context.Background()
	_, err := h.admin.ExecContext(ctx, `CREATE TABLE `+name+`.c (
		tenant varchar(8), id int, status varchar(8) NOT NULL DEFAULT 'pending', PRIMARY KEY (tenant, id));
		INSERT INTO `+name+`.c (tenant, id) VALUES ('a', 1), ('a', 2), ('b', 1)`)
	if err != nil {
		t.Fatal(err)
	}
	claim := compile(t, `SELECT tenant, id FROM c WHERE status = 'pending' ORDER BY tenant, id LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED`)
	tests := []struct {
		name    string
		mark    string
		wantErr string
		want    []string
	}{
		{"failing mark", `UPDATE c SET status = 'claimed' WHERE no_such_column = 1`, "mark", nil},
		{"mark with composite keys", `UPDATE c SET status = 'claimed' WHERE CONCAT(tenant, '/', id) IN ('{{ keys | join("','") }}')`, "", []string{"a/1", "a/2", "b/1"}},
		{"everything claimed", `UPDATE c SET status = 'x'`, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur, err := h.drv.Open(ctx, cursor.Spec{Kind: "mysql", Credential: cred, Claim: claim,
				Options: map[string]any{"mark": tt.mark, "key": "tenant, id"}})
			if err != nil {
				t.Fatal(err)
			}
			defer cur.Close()
			rows, err := cursortest.ClaimCommitted(ctx, cur, 10)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Claim: rows %v err %v, want error %q", rows, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, r := range rows {
				keys = append(keys, r.Key)
			}
			if !reflect.DeepEqual(keys, tt.want) {
				t.Fatalf("claimed %v, want %v", keys, tt.want)
			}
		})
	}
}

func TestClaimStatements(t *testing.T) {
	h := newHarness(t, mysql.Config{})
	_, cred := h.newDatabase(t, 3)
	ctx := context.Background()
	tests := []struct {
		name    string
		claim   string
		want    int
		wantErr string
	}{
		{"several statements, the last result set wins", `SET @n := {{ __frame_max_rows }}; SELECT 99 AS id; SELECT id FROM q ORDER BY id LIMIT {{ __frame_max_rows }}`, 2, ""},
		{"statements after the select", `SELECT id FROM q ORDER BY id LIMIT {{ __frame_max_rows }}; DO 1`, 2, ""},
		{"no result set", `DO 1`, 0, "no result set"},
		{"syntax error", `SELEKT 1`, 0, "1064"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur, err := h.drv.Open(ctx, cursor.Spec{Kind: "mysql", Credential: cred, Claim: compile(t, tt.claim)})
			if err != nil {
				t.Fatal(err)
			}
			defer cur.Close()
			rows, err := cursortest.ClaimCommitted(ctx, cur, 2)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Claim: %d rows, err %v; want error %q", len(rows), err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != tt.want || rows[0].Key != "1" {
				t.Fatalf("claimed %+v, want %d rows from q", rows, tt.want)
			}
		})
	}
}

// TestBoundParams: the claim and the ack take their values as bound ?
// params, so keys with quotes and backslashes reach the SQL intact.
func TestBoundParams(t *testing.T) {
	h := newHarness(t, mysql.Config{})
	name, cred := h.newDatabase(t, 0)
	ctx := context.Background()
	if _, err := h.admin.ExecContext(ctx, `CREATE TABLE `+name+`.named (name varchar(64) PRIMARY KEY, status varchar(8) NOT NULL DEFAULT 'pending')`); err != nil {
		t.Fatal(err)
	}
	names := []string{"O'Brien", `back\slash`, "$$x$$", "naïve"}
	for _, n := range names {
		if _, err := h.admin.ExecContext(ctx, `INSERT INTO `+name+`.named (name) VALUES (?)`, n); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := h.drv.Open(ctx, cursor.Spec{Kind: "mysql", Credential: cred, Scope: map[string]any{"wanted": "pending"},
		Claim: compile(t, `SELECT name FROM named WHERE status = ? ORDER BY name LIMIT ? FOR UPDATE SKIP LOCKED`),
		Options: map[string]any{
			"key":          "name",
			"claim_params": []any{"{{ wanted }}", "{{ __frame_max_rows }}"},
			"ack":          map[string]any{"sql": `UPDATE named SET status = 'done' WHERE JSON_CONTAINS(?, JSON_QUOTE(name))`, "params": []any{"{{ keys }}"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	claim, err := cur.Claim(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	rows := claim.Rows
	if len(rows) != len(names) {
		t.Fatalf("claimed %d rows", len(rows))
	}
	if err := claim.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cur.Ack(ctx, rows); err != nil {
		t.Fatal(err)
	}
	var done int
	if err := h.admin.QueryRowContext(ctx, `SELECT count(*) FROM `+name+`.named WHERE status = 'done'`).Scan(&done); err != nil || done != len(names) {
		t.Fatalf("%d rows done: %v", done, err)
	}
}

// TestUnsignedBigintKeysDrain: a queue keyed by BIGINT UNSIGNED ids past
// 2^63 drains. Each id reaches the mark, the ack and the row's values with
// all its digits, so the mark claims exactly the claimed rows and the
// queue empties instead of handing the same rows out forever; DECIMAL
// columns keep their digits too.
func TestUnsignedBigintKeysDrain(t *testing.T) {
	h := newHarness(t, mysql.Config{})
	name, cred := h.newDatabase(t, 0)
	ctx := context.Background()
	_, err := h.admin.ExecContext(ctx, `CREATE TABLE `+name+`.u (
		id bigint unsigned PRIMARY KEY, status varchar(8) NOT NULL DEFAULT 'pending', amount decimal(65,30));
		INSERT INTO `+name+`.u (id, amount) VALUES
		(42, 12.5), (9223372036854775808, 12345678901234567890.123456789), (18446744073709551615, 99999999999999999999)`)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := h.drv.Open(ctx, cursor.Spec{Kind: "mysql", Credential: cred,
		Claim: compile(t, `SELECT id, amount FROM u WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED`),
		Options: map[string]any{
			"mark": `UPDATE u SET status = 'claimed' WHERE id IN ({{ keys | join(',') }})`,
			"ack":  `UPDATE u SET status = 'done' WHERE status = 'claimed' AND id IN ({{ keys | join(',') }})`,
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	rows, err := cursortest.ClaimCommitted(ctx, cur, 10)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var ids, amounts []any
	for _, r := range rows {
		keys = append(keys, r.Key)
		ids = append(ids, r.Values["id"])
		amounts = append(amounts, r.Values["amount"])
	}
	if want := []string{"42", "9223372036854775808", "18446744073709551615"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	if want := []any{int64(42), "9223372036854775808", "18446744073709551615"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids %#v, want %#v", ids, want)
	}
	if want := []any{12.5, "12345678901234567890.123456789000000000000000000000", "99999999999999999999.000000000000000000000000000000"}; !reflect.DeepEqual(amounts, want) {
		t.Errorf("amounts %#v, want %#v", amounts, want)
	}
	var claimed int
	if err := h.admin.QueryRowContext(ctx, `SELECT count(*) FROM `+name+`.u WHERE status = 'claimed'`).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	if claimed != 3 {
		t.Fatalf("the mark claimed %d of the 3 rows", claimed)
	}
	if err := cur.Ack(ctx, rows); err != nil {
		t.Fatal(err)
	}
	again, err := cursortest.ClaimCommitted(ctx, cur, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Fatalf("claimed %d rows again after the ack, want the queue drained", len(again))
	}
}

// TestSQLFiltersQuoteForMySQL: in a mysql cursor's statements,
// sql_literal and sql_ident without a dialect quote as MySQL reads them,
// so a value with a backslash and a quote is written back as it was read
// (with PostgreSQL's E'...' literal MySQL refused the ack) and a quoted
// table name is an identifier, not a string.
func TestSQLFiltersQuoteForMySQL(t *testing.T) {
	h := newHarness(t, mysql.Config{})
	name, cred := h.newDatabase(t, 0)
	ctx := context.Background()
	note := `it's a \ backslash, a "quote" and 50% off`
	if _, err := h.admin.ExecContext(ctx, `CREATE TABLE `+name+`.jobs (
		id bigint PRIMARY KEY, status varchar(8) NOT NULL DEFAULT 'pending', note text, echo text)`); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.ExecContext(ctx, `INSERT INTO `+name+`.jobs (id, note) VALUES (1, ?)`, note); err != nil {
		t.Fatal(err)
	}
	cur, err := h.drv.Open(ctx, cursor.Spec{Kind: "mysql", Credential: cred,
		Claim: compile(t, `SELECT id, note FROM {{ 'jobs' | sql_ident }} WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED`),
		Options: map[string]any{
			"mark": `UPDATE {{ 'jobs' | sql_ident }} SET status = 'claimed' WHERE id IN ({{ keys | join(',') }})`,
			"ack":  `UPDATE {{ 'jobs' | sql_ident }} SET status = 'done', echo = {{ rows[0].note | sql_literal }} WHERE id IN ({{ keys | join(',') }})`,
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	rows, err := cursortest.ClaimCommitted(ctx, cur, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Values["note"] != note {
		t.Fatalf("claimed %v, want the one row with its note", rows)
	}
	if err := cur.Ack(ctx, rows); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	var status, echo string
	if err := h.admin.QueryRowContext(ctx, `SELECT status, echo FROM `+name+`.jobs WHERE id = 1`).Scan(&status, &echo); err != nil {
		t.Fatal(err)
	}
	if status != "done" || echo != note {
		t.Fatalf("row is %s with echo %q, want done with %q", status, echo, note)
	}
}

// TestZeroDatesRoundTrip: MySQL's zero dates ('0000-00-00', which legacy
// tables hold where sql_mode allows them) reach the rows as MySQL's text,
// so a body writing back what it read writes the zero date, not
// 0001-01-01; other dates keep their RFC 3339 form.
func TestZeroDatesRoundTrip(t *testing.T) {
	h := newHarness(t, mysql.Config{})
	name, cred := h.newDatabase(t, 0)
	ctx := context.Background()
	if _, err := h.admin.ExecContext(ctx, `SET SESSION sql_mode = '';
		CREATE TABLE `+name+`.legacy (id bigint PRIMARY KEY, d date, dt datetime, ts timestamp NULL, copy_d date, copy_dt datetime);
		INSERT INTO `+name+`.legacy (id, d, dt, ts) VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00'),
			(2, '2024-02-29', '2024-02-29 13:14:15', NULL)`); err != nil {
		t.Fatal(err)
	}
	cur, err := h.drv.Open(ctx, cursor.Spec{Kind: "mysql", Credential: cred,
		Claim: compile(t, `SELECT id, d, dt, ts FROM legacy WHERE copy_dt IS NULL ORDER BY id LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED`),
		Options: map[string]any{
			"ack": `SET SESSION sql_mode = ''; UPDATE legacy SET copy_d = {{ rows[0].d | sql_literal }}, copy_dt = {{ rows[0].dt | sql_literal }} WHERE id = {{ keys[0] }}`,
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	rows, err := cursortest.ClaimCommitted(ctx, cur, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("claimed %d rows, want 2", len(rows))
	}
	want := []map[string]any{
		{"id": int64(1), "d": "0000-00-00", "dt": "0000-00-00 00:00:00", "ts": "0000-00-00 00:00:00"},
		{"id": int64(2), "d": "2024-02-29T00:00:00Z", "dt": "2024-02-29T13:14:15Z", "ts": nil},
	}
	for i, r := range rows {
		if !reflect.DeepEqual(r.Values, want[i]) {
			t.Errorf("row %d: %#v, want %#v", i+1, r.Values, want[i])
		}
	}
	if err := cur.Ack(ctx, rows[:1]); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	var d, dt string
	if err := h.admin.QueryRowContext(ctx, `SELECT CAST(copy_d AS char), CAST(copy_dt AS char) FROM `+name+`.legacy WHERE id = 1`).Scan(&d, &dt); err != nil {
		t.Fatal(err)
	}
	if d != "0000-00-00" || dt != "0000-00-00 00:00:00" {
		t.Fatalf("written back as %q and %q, want the zero date", d, dt)
	}
}
