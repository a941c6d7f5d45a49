package drivertest

import (
	"log/slog"
	"strconv"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/dsl"
)

// SeqKeys returns the keys "1" ... "n": the keys of a queue whose rows
// have the ids 1 to n, in source order.
func SeqKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strconv.Itoa(i + 1)
	}
	return keys
}

// Rows is the part of *sql.Rows, pgx.Rows and ClickHouse's driver.Rows
// that [Strings] reads. Their Close methods differ (with or without an
// error result); Strings calls whichever rows has.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Strings takes the results of a query of one text column, fails the
// test if err is not nil, and otherwise reads rows to the end, closes
// them and returns the column's values:
//
//	rows, err := db.Query(`SELECT id FROM q WHERE status = 'dead' ORDER BY id`)
//	return drivertest.Strings(t, rows, err)
func Strings(t testing.TB, rows Rows, err error) []string {
	t.Helper()
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	switch c := rows.(type) {
	case interface{ Close() error }:
		defer c.Close()
	case interface{ Close() }:
		defer c.Close()
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// StatusOptions returns the cursor options of a SQL queue table whose
// rows move through a status column ('pending', 'claimed', 'dead'):
// a release statement that puts claimed rows back to pending and, when
// maxAttempts > 0, a dead_letter statement that marks rows dead. table is
// the table as the statements name it: a name, or a template such as
// "{{ workload.table }}".
func StatusOptions(table string, maxAttempts int) map[string]any {
	options := map[string]any{
		"release": `UPDATE ` + table + ` SET status = 'pending' WHERE status = 'claimed' AND id IN ({{ keys | join(', ') }})`,
	}
	if maxAttempts > 0 {
		options["dead_letter"] = `UPDATE ` + table + ` SET status = 'dead' WHERE id IN ({{ keys | join(', ') }})`
	}
	return options
}

// TableQueue describes a SQL queue that is one table with the columns id,
// payload, status, attempts and claimed_at, drained by a claim template
// that reads the table's name from workload.table, the lease from
// workload.lease_ms (0: no reclaim clause) and whether to echo
// __worker_slot_id, __worker_slot_index and __frame_max_rows from
// workload.echo.
type TableQueue struct {
	// Kind is the cursor kind (postgres, sqlite, ...).
	Kind string
	// Auth is the credential alias named in the Spec.
	Auth string
	// Credential is what the alias resolves to.
	Credential string
	// Claim is the claim template's source.
	Claim string
	// Table is the table's name as the statements write it.
	Table string
}

// Spec returns the cursor.Spec of a cursortest queue on q: the compiled
// claim, the workload scope described on [TableQueue], [StatusOptions] and
// a logger writing to the test's output.
func (q TableQueue) Spec(t testing.TB, opts cursortest.QueueOptions) cursor.Spec {
	t.Helper()
	claim, err := dsl.CompileTemplate(q.Claim, dsl.Pos{})
	if err != nil {
		t.Fatalf("compile claim: %v", err)
	}
	return cursor.Spec{
		Kind:       q.Kind,
		Auth:       q.Auth,
		Credential: q.Credential,
		Claim:      claim,
		Scope: map[string]any{"workload": map[string]any{
			"table":    q.Table,
			"lease_ms": opts.Lease.Milliseconds(),
			"echo":     opts.EchoTemplateVars,
		}},
		Options:     StatusOptions("{{ workload.table }}", opts.MaxAttempts),
		Lease:       opts.Lease,
		MaxAttempts: opts.MaxAttempts,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
}

// TableOf returns the table of a Spec made by [TableQueue.Spec].
func TableOf(spec cursor.Spec) string {
	return spec.Scope["workload"].(map[string]any)["table"].(string)
}
