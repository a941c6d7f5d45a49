package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/postgres"
	"github.com/cursorflow/cursorflow/dsl"
)

// records is a slog handler that keeps what is logged, for assertions.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }
func (r *records) count(substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

func mustTemplate(t testing.TB, src string) *dsl.Template {
	t.Helper()
	tmpl, err := dsl.CompileTemplate(src, dsl.Pos{})
	if err != nil {
		t.Fatalf("compile %q: %v", src, err)
	}
	return tmpl
}

func openCursor(t *testing.T, h *harness, spec cursor.Spec) cursor.Cursor {
	t.Helper()
	cur, err := h.drv.Open(t.Context(), spec)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = cur.Close() })
	return cur
}

func statusCount(t *testing.T, h *harness, table, status string) int {
	t.Helper()
	var n int
	if err := h.admin.QueryRow(t.Context(), `SELECT count(*) FROM `+table+` WHERE status = $1`, status).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestValues(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	spec := cursor.Spec{Kind: "postgres", Auth: "pg_test", Credential: h.base, Claim: mustTemplate(t, `SELECT
		7::int2 AS i2, 8::int4 AS i4, 9000000000::int8 AS i8, 1.5::float4 AS f4, 2.25::float8 AS f8,
		12.50::numeric AS dec, 42::numeric AS whole, 'NaN'::numeric AS nan, true AS b, 'x'::text AS t,
		'y'::varchar AS v, NULL::int AS nul, '2024-01-02T03:04:05.5+01:00'::timestamptz AS ts,
		'2024-01-02 03:04:05'::timestamp AS tsl, '2024-01-02'::date AS d,
		'{"a": 1, "b": [1, 2.5, "s"], "c": null}'::jsonb AS jb, '[1, {"x": true}]'::json AS j,
		ARRAY[1, 2]::int[] AS ints, ARRAY['a', NULL]::text[] AS texts,
		'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS u, '\x00ff'::bytea AS bin, 'abc'::bytea AS txtbin,
		'10.0.0.0/8'::cidr AS net`)}
	cur := openCursor(t, h, spec)
	rows, err := cursortest.ClaimCommitted(t.Context(), cur, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("got %d rows", len(rows))
	}
	want := map[string]any{
		"i2": int64(7), "i4": int64(8), "i8": int64(9000000000), "f4": 1.5, "f8": 2.25,
		"dec": 12.5, "whole": int64(42), "nan": "NaN", "b": true, "t": "x", "v": "y", "nul": nil,
		"ts": "2024-01-02T02:04:05.5Z", "tsl": "2024-01-02T03:04:05Z", "d": "2024-01-02T00:00:00Z",
		"jb":    map[string]any{"a": int64(1), "b": []any{int64(1), 2.5, "s"}, "c": nil},
		"j":     []any{int64(1), map[string]any{"x": true}},
		"ints":  []any{int64(1), int64(2)},
		"texts": []any{"a", nil},
		"u":     "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "bin": "AP8=", "txtbin": "abc",
		"net": "10.0.0.0/8",
	}
	got := rows[0].Values
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s = %#v (%T), want %#v (%T)", k, got[k], got[k], w, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d columns, want %d", len(got), len(want))
	}
	// No id column: the first column is the key.
	if rows[0].Key != "7" || rows[0].Lease.Attempt != 1 || !rows[0].Lease.Deadline.IsZero() {
		t.Errorf("key %q, lease %+v; want key 7, attempt 1, no deadline", rows[0].Key, rows[0].Lease)
	}
}

func TestMultiStatementClaim(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	table := h.createTable(t, 5)
	spec := cursor.Spec{Kind: "postgres", Credential: h.base, Claim: mustTemplate(t, `
		SET LOCAL lock_timeout = '2s';
		SELECT 'not me' AS decoy;
		UPDATE `+table+` SET status = 'claimed', attempts = attempts + 1
		 WHERE id IN (SELECT id FROM `+table+` WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED)
		RETURNING id, attempts;
		SELECT 1 WHERE false`)}
	cur := openCursor(t, h, spec)
	rows, err := cursortest.ClaimCommitted(t.Context(), cur, 3)
	if err != nil {
		t.Fatal(err)
	}
	// The last statement returns a result set (empty): it is the claim's
	// result, and every statement ran in one transaction.
	if len(rows) != 0 {
		t.Fatalf("got %d rows from a claim whose last result set is empty", len(rows))
	}
	if n := statusCount(t, h, table, "claimed"); n != 3 {
		t.Fatalf("%d rows claimed, want 3", n)
	}
	spec.Claim = mustTemplate(t, `SET LOCAL lock_timeout = '2s'; UPDATE `+table+` SET status = 'claimed', attempts = attempts + 1
		WHERE status = 'pending' RETURNING id, attempts`)
	cur = openCursor(t, h, spec)
	rows, err = cursortest.ClaimCommitted(t.Context(), cur, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Lease.Attempt != 1 {
		t.Fatalf("got %+v, want the 2 remaining rows at attempt 1", rows)
	}
}

func TestAckAndKeyOptions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	table := h.createTable(t, 4)
	spec := cursor.Spec{Kind: "postgres", Credential: h.base,
		Scope: map[string]any{"table": table},
		Claim: mustTemplate(t, `UPDATE {{ table }} SET status = 'claimed', attempts = attempts + 1
			WHERE id IN (SELECT id FROM {{ table }} WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }})
			RETURNING 'acme' AS tenant, id, attempts AS attempt_count`),
		Options: map[string]any{
			"key": "tenant, id",
			"ack": `UPDATE {{ table }} SET status = 'done' WHERE id IN ({{ rows | map(attribute='id') | join(',') }})`,
		},
	}
	cur := openCursor(t, h, spec)
	rows, err := cursortest.ClaimCommitted(t.Context(), cur, 3)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range rows {
		keys = append(keys, r.Key)
	}
	if len(keys) != 3 || !strings.HasPrefix(keys[0], "acme/") {
		t.Fatalf("keys %v, want 3 composite keys acme/<id>", keys)
	}
	if err := cur.Ack(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	if n := statusCount(t, h, table, "done"); n != 3 {
		t.Fatalf("%d rows done after Ack, want 3", n)
	}
	// Ack and Release of nothing are no-ops; Release without a statement
	// cannot hand rows back and says so.
	if err := cur.Ack(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if err := cur.Release(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if err := cur.Release(t.Context(), rows); !errors.Is(err, cursor.ErrUnsupported) {
		t.Fatalf("Release without a statement: %v, want ErrUnsupported", err)
	}
	// Without dead_letter, DeadLetter is unsupported rather than silent.
	err = cur.(cursor.DeadLetterer).DeadLetter(t.Context(), rows, "x")
	if !errors.Is(err, cursor.ErrUnsupported) {
		t.Fatalf("DeadLetter without a statement: %v, want ErrUnsupported", err)
	}
}

func TestPoisonWithoutDeadLetterIsReturned(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	table := h.createTable(t, 1)
	if _, err := h.admin.Exec(t.Context(), `UPDATE `+table+` SET attempts = 5`); err != nil {
		t.Fatal(err)
	}
	spec := cursor.Spec{Kind: "postgres", Credential: h.base, MaxAttempts: 3,
		Claim: mustTemplate(t, `UPDATE `+table+` SET status = 'claimed', attempts = attempts + 1 WHERE status = 'pending' RETURNING id, attempts`)}
	rows, err := cursortest.ClaimCommitted(t.Context(), openCursor(t, h, spec), 1)
	if err != nil {
		t.Fatal(err)
	}
	// With no dead_letter statement the row is not dropped: the engine's
	// own attempt policy sees Lease.Attempt.
	if len(rows) != 1 || rows[0].Lease.Attempt != 6 {
		t.Fatalf("got %+v, want the row at attempt 6", rows)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	table := h.createTable(t, 1)
	log := &records{}
	tests := []struct {
		name, credential, claim, op, want string
	}{
		{"no result set", h.base, `UPDATE ` + table + ` SET status = 'x' WHERE false`, "claim", "no result set"},
		{"sql error", h.base, `SELECT * FROM missing_table_xyz`, "claim", "missing_table_xyz"},
		{"render error", h.base, `SELECT {{ nofn() }}`, "claim", "render claim"},
		{"unreachable server", "postgres://postgres:s3cr3t@127.0.0.1:1/test?connect_timeout=2", `SELECT 1`, "claim", "127.0.0.1"},
		{"malformed credential", "postgres://postgres:s3cr3t@[::1", `SELECT 1`, "open", "not a valid postgres connection string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := cursor.Spec{Kind: "postgres", Auth: "pg_alias", Credential: tt.credential,
				Claim: mustTemplate(t, tt.claim), Logger: slog.New(log)}
			cur, err := h.drv.Open(t.Context(), spec)
			if err == nil {
				defer cur.Close()
				_, err = cursortest.ClaimCommitted(t.Context(), cur, 1)
			}
			var ce *cursor.ClaimError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want a *cursor.ClaimError", err, err)
			}
			if ce.Op != tt.op || ce.Auth != "pg_alias" || ce.Kind != "postgres" {
				t.Errorf("ClaimError %+v, want op %s, auth pg_alias", ce, tt.op)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || !strings.Contains(msg, "pg_alias") {
				t.Errorf("error %q does not mention %q and the alias", msg, tt.want)
			}
			if strings.Contains(msg, "s3cr3t") {
				t.Errorf("error leaks the password: %q", msg)
			}
		})
	}
	// Statement errors are not connection losses: nothing was retried.
	if n := log.count("retrying"); n != 0 {
		t.Errorf("%d retries logged for statement errors", n)
	}
	if _, err := h.drv.Open(t.Context(), cursor.Spec{Kind: "postgres", Credential: h.base}); err == nil {
		t.Error("Open without a claim succeeded")
	}
	if _, err := cursortest.ClaimCommitted(t.Context(), openCursor(t, h, cursor.Spec{Kind: "postgres", Credential: h.base, Claim: mustTemplate(t, "SELECT 1")}), 0); err == nil {
		t.Error("Claim(0) succeeded")
	}
}

// TestReconnectRetriesOnce proves the reconnect case passes through the
// driver's retry, not by luck of the pool handing out a live connection.
func TestReconnectRetriesOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	spec, keys := h.NewQueue(t, 4, cursortest.QueueOptions{})
	log := &records{}
	spec.Logger = slog.New(log)
	cur := openCursor(t, h, spec)
	for round := range 2 {
		rows, err := cursortest.ClaimCommitted(t.Context(), cur, 1)
		if err != nil || len(rows) != 1 {
			t.Fatalf("round %d: Claim: %d rows, %v", round, len(rows), err)
		}
		h.DropConnections(t, spec)
		if got := log.count("connection lost"); got != round {
			t.Fatalf("round %d: %d retries logged before the claim, want %d", round, got, round)
		}
	}
	rows, err := cursortest.ClaimCommitted(t.Context(), cur, len(keys))
	if err != nil {
		t.Fatalf("Claim after the second drop: %v", err)
	}
	if len(rows) != 2 || log.count("connection lost") != 2 {
		t.Fatalf("%d rows, %d retries logged; want 2 rows and 2 retries", len(rows), log.count("connection lost"))
	}
}

func TestDriverClose(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{MaxConns: 2})
	spec := cursor.Spec{Kind: "postgres", Credential: h.base, Claim: mustTemplate(t, "SELECT 1 AS id")}
	cur := openCursor(t, h, spec)
	if _, err := cursortest.ClaimCommitted(t.Context(), cur, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.drv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.drv.Open(t.Context(), spec); !errors.Is(err, cursor.ErrClosed) {
		t.Fatalf("Open after Close: %v, want ErrClosed", err)
	}
	if _, err := cursortest.ClaimCommitted(t.Context(), cur, 1); err == nil {
		t.Fatal("Claim on a closed driver's pool succeeded")
	}
}

// TestBoundParams: the claim and the ack take their values as bound
// params, so keys with quotes, backslashes and dollar quotes reach the
// SQL intact and inject nothing.
func TestBoundParams(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	table := h.schema + ".named"
	names := []string{"O'Brien", `back\slash`, "$$x$$", "naïve — 日本", `'); DROP TABLE x; --`}
	if _, err := h.admin.Exec(t.Context(), `CREATE TABLE `+table+` (name text PRIMARY KEY, status text NOT NULL DEFAULT 'pending')`); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.Exec(t.Context(), `INSERT INTO `+table+` (name) SELECT unnest($1::text[])`, names); err != nil {
		t.Fatal(err)
	}
	spec := cursor.Spec{Kind: "postgres", Credential: h.base, Scope: map[string]any{"table": table, "wanted": "pending"},
		Claim: mustTemplate(t, `UPDATE {{ table }} SET status = 'claimed'
			WHERE name IN (SELECT name FROM {{ table }} WHERE status = $1 ORDER BY name LIMIT $2) RETURNING name`),
		Options: map[string]any{
			"key":          "name",
			"claim_params": []any{"{{ wanted }}", "{{ __frame_max_rows }}"},
			"ack": map[string]any{
				"sql":    `UPDATE {{ table }} SET status = 'done' WHERE name IN (SELECT jsonb_array_elements_text($1::jsonb))`,
				"params": []any{"{{ keys }}"},
			},
		},
	}
	cur := openCursor(t, h, spec)
	claim, err := cur.Claim(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	rows := claim.Rows
	if len(rows) != len(names) {
		t.Fatalf("claimed %d rows, want %d", len(rows), len(names))
	}
	if err := claim.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := cur.Ack(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	if n := statusCount(t, h, table, "done"); n != len(names) {
		t.Fatalf("%d rows done after Ack, want %d", n, len(names))
	}
}

// TestBoundParamsInTheClaimTransaction: a claim with bound params runs in
// the claim's open transaction (BEGIN, then the bound statement), and the
// dead_letter statement with bound params buries the rows past
// max_attempts inside that transaction — they are dead-lettered only when
// the claim commits, and not at all when it is aborted.
func TestBoundParamsInTheClaimTransaction(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	table := h.schema + ".poison"
	if _, err := h.admin.Exec(t.Context(), `CREATE TABLE `+table+` (name text PRIMARY KEY, status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0, reason text);
		INSERT INTO `+table+` (name, attempts) VALUES ('O''Brien', 5), ('ok', 0)`); err != nil {
		t.Fatal(err)
	}
	spec := cursor.Spec{Kind: "postgres", Credential: h.base, Scope: map[string]any{"table": table}, MaxAttempts: 3,
		Claim: mustTemplate(t, `UPDATE {{ table }} SET status = 'claimed', attempts = attempts + 1
			WHERE name IN (SELECT name FROM {{ table }} WHERE status = $1 ORDER BY name LIMIT $2) RETURNING name, attempts`),
		Options: map[string]any{
			"key":          "name",
			"claim_params": []any{"pending", "{{ __frame_max_rows }}"},
			"dead_letter": map[string]any{
				"sql":    `UPDATE {{ table }} SET status = 'dead', reason = $2 WHERE name IN (SELECT jsonb_array_elements_text($1::jsonb))`,
				"params": []any{"{{ keys }}", "{{ reason }}"},
			},
		},
	}
	cur := openCursor(t, h, spec)
	claim, err := cur.Claim(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(claim.Rows) != 1 || claim.Rows[0].Key != "ok" {
		t.Fatalf("claimed %+v, want only the row under max_attempts", claim.Rows)
	}
	if n := statusCount(t, h, table, "pending"); n != 2 {
		t.Fatalf("%d rows pending while the claim is open, want 2 (claim and dead letter uncommitted)", n)
	}
	if err := claim.Abort(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := statusCount(t, h, table, "pending"); n != 2 {
		t.Fatalf("%d rows pending after Abort, want 2", n)
	}
	claim, err = cur.Claim(t.Context(), 10)
	if err != nil || len(claim.Rows) != 1 {
		t.Fatalf("second claim: %+v, %v", claim, err)
	}
	if err := claim.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	var reason string
	if err := h.admin.QueryRow(t.Context(), `SELECT reason FROM `+table+` WHERE status = 'dead' AND name = 'O''Brien'`).Scan(&reason); err != nil {
		t.Fatalf("the poison row was not dead-lettered: %v", err)
	}
	if !strings.Contains(reason, "max_attempts 3") {
		t.Fatalf("dead letter reason %q", reason)
	}
	if n := statusCount(t, h, table, "claimed"); n != 1 {
		t.Fatalf("%d rows claimed after Commit, want 1", n)
	}
}

// TestClaimCommitsWithoutWaitingForTheFlush: a claim's transaction runs
// with synchronous_commit off (the engine's log holds the rows before the
// commit), with and without bound params, and a claim can set it back.
func TestClaimCommitsWithoutWaitingForTheFlush(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	for _, tc := range []struct{ name, claim, want string }{
		{"simple", `SELECT 1 AS id, current_setting('synchronous_commit') AS sc`, "off"},
		{"bound params", `SELECT $1::int AS id, current_setting('synchronous_commit') AS sc`, "off"},
		{"set back by the claim", `SET LOCAL synchronous_commit = on; SELECT 1 AS id, current_setting('synchronous_commit') AS sc`, "on"},
	} {
		spec := cursor.Spec{Kind: "postgres", Credential: h.base, Claim: mustTemplate(t, tc.claim)}
		if tc.name == "bound params" {
			spec.Options = map[string]any{"claim_params": []any{1}}
		}
		rows, err := cursortest.ClaimCommitted(t.Context(), openCursor(t, h, spec), 1)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(rows) != 1 || rows[0].Values["sc"] != tc.want {
			t.Fatalf("%s: claimed %+v, want synchronous_commit %s", tc.name, rows, tc.want)
		}
	}
}

// TestSplicedValuesReachTheDatabaseAsTheyAre: a row value spliced into an
// ack with sql_literal, as the driver documentation says to, is written as
// it is even when it looks like a psycopg placeholder or escape: the ack
// holds no placeholder of its own, so nothing in it is read as one. A
// statement that does hold one still has it filled.
func TestSplicedValuesReachTheDatabaseAsTheyAre(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	table := h.createTable(t, 0)
	notes := []string{"discount 50%% off", "slot %(__worker_slot_id)s here", "%(no_such_variable)s", "100%"}
	for i, n := range notes {
		if _, err := h.admin.Exec(t.Context(), `INSERT INTO `+table+` (id, payload) VALUES ($1, jsonb_build_object('note', $2::text))`, i+1, n); err != nil {
			t.Fatal(err)
		}
	}
	spec := cursor.Spec{Kind: "postgres", Credential: h.base, WorkerSlotID: 7,
		Scope: map[string]any{"table": table},
		Claim: mustTemplate(t, `UPDATE {{ table }} SET status = 'claimed' WHERE status = 'pending'
			RETURNING id, payload->>'note' AS note`),
		Options: map[string]any{
			"ack": `UPDATE {{ table }} t SET status = 'done', payload = t.payload || jsonb_build_object('out', r.note)
				FROM jsonb_to_recordset({{ rows | tojson | sql_literal }}::jsonb) AS r(id bigint, note text)
				WHERE t.id = r.id`,
			"release": `UPDATE {{ table }} SET status = 'pending', claimed_at = now() - interval '%(__worker_slot_id)s seconds'
				WHERE id IN ({{ keys | join(',') }})`,
		},
	}
	cur := openCursor(t, h, spec)
	rows, err := cursortest.ClaimCommitted(t.Context(), cur, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(notes) {
		t.Fatalf("claimed %d rows, want %d", len(rows), len(notes))
	}
	if err := cur.Ack(t.Context(), rows); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	got, err := h.admin.Query(t.Context(), `SELECT payload->>'out' FROM `+table+` WHERE status = 'done' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for got.Next() {
		var s string
		if err := got.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := got.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, notes) {
		t.Fatalf("acked notes %q, want %q", out, notes)
	}
	// The release's own placeholder is filled.
	if err := cur.Release(t.Context(), rows[:1]); err != nil {
		t.Fatalf("Release: %v", err)
	}
	var secs float64
	if err := h.admin.QueryRow(t.Context(), `SELECT extract(epoch FROM now() - claimed_at) FROM `+table+` WHERE id = 1`).Scan(&secs); err != nil {
		t.Fatal(err)
	}
	if secs < 7 || secs > 60 {
		t.Fatalf("released row's claimed_at is %vs ago, want about 7s (%%(__worker_slot_id)s filled)", secs)
	}
}

// TestNumericKeepsEveryDigit: numeric values reach the rows exactly: an
// int64 or a float64 where one holds the value, else the decimal's text.
func TestNumericKeepsEveryDigit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	spec := cursor.Spec{Kind: "postgres", Credential: h.base, Claim: mustTemplate(t, `SELECT 1 AS id,
		12.50::numeric AS dec, 0.1::numeric AS tenth, 42::numeric AS whole,
		12345678901234567890.123456789::numeric AS long, 99999999999999999999::numeric AS huge,
		3.14159265358979323846264338327950288::numeric AS pi, 'Infinity'::numeric AS inf, NULL::numeric AS nul`)}
	cur := openCursor(t, h, spec)
	rows, err := cursortest.ClaimCommitted(t.Context(), cur, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": int64(1), "dec": 12.5, "tenth": 0.1, "whole": int64(42),
		"long": "12345678901234567890.123456789", "huge": "99999999999999999999",
		"pi": "3.14159265358979323846264338327950288", "inf": "Infinity", "nul": nil}
	if len(rows) != 1 || !reflect.DeepEqual(rows[0].Values, want) {
		t.Fatalf("rows %#v, want one row %#v", rows, want)
	}
}

// TestListParamsAsArrays: a list bound where a cursor's statement wants an
// array goes as that array: claim_params' list in = ANY($1), and the
// ack's {{ keys }} in name = ANY($1::text[]). Lists used to go as JSON
// only ("malformed array literal").
func TestListParamsAsArrays(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	table := h.schema + ".listed"
	names := []string{"O'Brien", `back\slash`, `"quoted"`, "a,b", "{brace}", "left"}
	if _, err := h.admin.Exec(t.Context(), `CREATE TABLE `+table+` (name text PRIMARY KEY, status text NOT NULL DEFAULT 'pending')`); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.Exec(t.Context(), `INSERT INTO `+table+` (name) SELECT unnest($1::text[])`, names); err != nil {
		t.Fatal(err)
	}
	wanted := []any{}
	for _, n := range names[:5] {
		wanted = append(wanted, n)
	}
	spec := cursor.Spec{Kind: "postgres", Credential: h.base, Scope: map[string]any{"table": table, "wanted": wanted},
		Claim: mustTemplate(t, `UPDATE {{ table }} SET status = 'claimed'
			WHERE name IN (SELECT name FROM {{ table }} WHERE status = 'pending' AND name = ANY($1) ORDER BY name LIMIT $2) RETURNING name`),
		Options: map[string]any{
			"key":          "name",
			"claim_params": []any{"{{ wanted }}", "{{ __frame_max_rows }}"},
			"ack":          map[string]any{"sql": `UPDATE {{ table }} SET status = 'done' WHERE name = ANY($1::text[])`, "params": []any{"{{ keys }}"}},
		},
	}
	cur := openCursor(t, h, spec)
	claim, err := cur.Claim(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(claim.Rows) != len(wanted) {
		t.Fatalf("claimed %d rows, want %d", len(claim.Rows), len(wanted))
	}
	if err := claim.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := cur.Ack(t.Context(), claim.Rows); err != nil {
		t.Fatal(err)
	}
	if n := statusCount(t, h, table, "done"); n != len(wanted) {
		t.Fatalf("%d rows done after Ack, want %d", n, len(wanted))
	}
}
