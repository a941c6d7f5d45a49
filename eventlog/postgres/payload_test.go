package postgres_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
)

// The log hands back a payload's bytes as they were appended, as the
// SQLite and in-memory logs do: key order, spacing, duplicate keys,
// number spellings and \u0000 (which jsonb refused) survive.
func TestPayloadComesBackVerbatim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testPool(t)
	l := newLog(t, pool, randomSchema(t, pool))
	exec := logtest.ExecutionID("verbatim")
	payloads := []string{
		`{"z":1,  "a":[1.50, 2e3, -0.0],"a":"twice"}`,
		` {"nul":"a\u0000b", "esc":"\u00e9\n"} `,
		`12.500`,
	}
	var batch []eventlog.Event
	for _, p := range payloads {
		batch = append(batch, eventlog.Event{ExecutionID: exec, Type: eventlog.TypeStepCompleted, Step: "s",
			Payload: json.RawMessage(p), Meta: json.RawMessage(p)})
	}
	if _, err := l.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	evs, err := l.Read(ctx, exec, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(payloads) {
		t.Fatalf("read %d events, want %d", len(evs), len(payloads))
	}
	for i, e := range evs {
		if string(e.Payload) != payloads[i] || string(e.Meta) != payloads[i] {
			t.Errorf("event %d: payload %q meta %q, want %q", i, e.Payload, e.Meta, payloads[i])
		}
	}
}

// A schema made by the migrations before 0004, with jsonb payloads and
// events in it, upgrades in place when a log opens it: its events read
// back as JSON of the same value, and new appends go on from its seq.
func TestUpgradeFromJSONB(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testPool(t)
	schema := randomSchema(t, pool)
	quoted := pgx.Identifier{schema}.Sanitize()
	applyMigrations(t, pool, schema, "0001_init", "0002_snapshots", "0003_fanin")
	exec := logtest.ExecutionID("upgrade")
	if _, err := pool.Exec(ctx, "INSERT INTO "+quoted+`.events (execution_id, seq, type, payload, meta, time)
		VALUES ($1, 1, 'execution.started', '{"b": [1, 2.50], "a": "x"}', '{"trace": "t"}', now());
		`, exec); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+quoted+".executions (execution_id, last_seq, started) VALUES ($1, 1, true)", exec); err != nil {
		t.Fatal(err)
	}

	l := newLog(t, pool, schema)
	var kind string
	if err := pool.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attname = 'payload'`, quoted+".events").Scan(&kind); err != nil || kind != "text" {
		t.Fatalf("payload column is %q (%v) after the upgrade, want text", kind, err)
	}
	res, err := l.Append(ctx, []eventlog.Event{{ExecutionID: exec, Type: eventlog.TypeStepStarted, Step: "s", Payload: json.RawMessage(`{"n": 1}`)}})
	if err != nil || res[0].Seq != 2 {
		t.Fatalf("append after the upgrade = %+v, %v; want seq 2", res, err)
	}
	evs, err := l.Read(ctx, exec, 0, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("read %d events, %v; want 2", len(evs), err)
	}
	if !logtest.JSONEqual(evs[0].Payload, json.RawMessage(`{"a":"x","b":[1,2.5]}`)) || !bytes.Equal(evs[1].Payload, []byte(`{"n": 1}`)) {
		t.Fatalf("payloads after the upgrade: %s, %s", evs[0].Payload, evs[1].Payload)
	}
}

// applyMigrations makes schema as the named migrations, in order, left it,
// as a log of an older version of this package did.
func applyMigrations(t *testing.T, pool *pgxpool.Pool, schema string, names ...string) {
	t.Helper()
	ctx := t.Context()
	quoted := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+quoted+"; CREATE TABLE "+quoted+
		".schema_version (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
		pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{{schema}}", quoted, "{{schema_literal}}", "'"+strings.ReplaceAll(schema, "'", "''")+"'")
	for v, name := range names {
		b, err := os.ReadFile(filepath.Join("migrations", name+".sql"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, fill.Replace(string(b)), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := pool.Exec(ctx, "INSERT INTO "+quoted+".schema_version (version, name) VALUES ($1, $2)", v+1, name); err != nil {
			t.Fatal(err)
		}
	}
}

// A log made before 0006, with json payloads, upgrades in place when a
// log opens it: payload and meta become text, its events read back byte
// for byte, and appends go on from its seqs, through the lean statement
// too, with its duplicate check (a command.issued on record stays one).
func TestUpgradeFromJSON(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testPool(t)
	schema := randomSchema(t, pool)
	quoted := pgx.Identifier{schema}.Sanitize()
	applyMigrations(t, pool, schema, "0001_init", "0002_snapshots", "0003_fanin", "0004_payload_json", "0005_execution_started")
	exec := logtest.ExecutionID("upgrade-json")
	old := []string{`{"b": [1, 2.50], "a":"x"}`, `{"kind":"frame"}`}
	if _, err := pool.Exec(ctx, "INSERT INTO "+quoted+`.events (execution_id, seq, type, command_id, payload, meta, time)
		VALUES ($1, 1, 'execution.started', NULL, $2, $2, now()), ($1, 2, 'command.issued', 'c1', $3, NULL, now())`,
		exec, old[0], old[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+quoted+`.executions (execution_id, last_seq, first_id, started, started_at)
		SELECT $1, 2, min(id), true, now() FROM `+quoted+".events", exec); err != nil {
		t.Fatal(err)
	}

	l := newLog(t, pool, schema)
	rows, err := pool.Query(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attname IN ('payload', 'meta')`, quoted+".events")
	if err != nil {
		t.Fatal(err)
	}
	kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || strings.Join(kinds, " ") != "text text" {
		t.Fatalf("payload and meta are %v (%v) after the upgrade, want text", kinds, err)
	}
	// A frame's batch: the lean statement. c1 is on record: the batch
	// goes to the general statement, which stores the rest.
	batch := []eventlog.Event{
		{ExecutionID: exec, Type: eventlog.TypeCommandIssued, CommandID: "c1", Payload: json.RawMessage(`{"again":1}`)},
		{ExecutionID: exec, Type: eventlog.TypeFrameClaimed, CommandID: "c1", Payload: json.RawMessage(`{"rows": [1]}`)},
	}
	res, err := l.Append(ctx, batch)
	if err != nil || !res[0].Duplicate || res[1].Seq != 3 {
		t.Fatalf("append after the upgrade = %+v, %v; want a duplicate, then seq 3", res, err)
	}
	batch[0].CommandID = "c2"
	if res, err = l.Append(ctx, batch); err != nil || res[0].Seq != 4 || res[1].Seq != 5 {
		t.Fatalf("second append after the upgrade = %+v, %v; want seqs 4 and 5", res, err)
	}
	evs, err := l.Read(ctx, exec, 0, 0)
	if err != nil || len(evs) != 5 {
		t.Fatalf("read %d events, %v; want 5", len(evs), err)
	}
	want := []string{old[0], old[1], `{"rows": [1]}`, `{"again":1}`, `{"rows": [1]}`}
	for i, e := range evs {
		if string(e.Payload) != want[i] {
			t.Errorf("event %d: payload %s, want %s", i+1, e.Payload, want[i])
		}
	}
	if string(evs[0].Meta) != old[0] {
		t.Errorf("event 1: meta %s, want %s", evs[0].Meta, old[0])
	}
}

// Where the server has lz4, the migration sets it on payload and meta,
// also in a schema whose name holds quotes (the migration quotes it into
// a string literal, and a mistake there would only skip lz4 silently).
func TestPayloadCompressionLZ4(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testPool(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, lz4Err := tx.Exec(ctx, "SET LOCAL default_toast_compression = lz4")
	_ = tx.Rollback(ctx)
	if lz4Err != nil {
		t.Skipf("this server has no lz4 (%v): the columns keep pglz", lz4Err)
	}
	for _, suffix := range []string{"", `_it's "odd"`} {
		schema := randomSchemaEnding(t, pool, suffix)
		newLog(t, pool, schema)
		rows, err := pool.Query(ctx, `SELECT attname, attcompression::text FROM pg_attribute
			WHERE attrelid = $1::regclass AND attname IN ('payload', 'meta') ORDER BY attname`, pgx.Identifier{schema}.Sanitize()+".events")
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var name, c string
			err := r.Scan(&name, &c)
			return name + ":" + c, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " ") != "meta:l payload:l" {
			t.Fatalf("schema %q: column compression %v, want lz4 (l) on meta and payload", schema, got)
		}
	}
}
