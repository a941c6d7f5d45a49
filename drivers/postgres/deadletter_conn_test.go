package postgres_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/postgres"
)

// TestDeadLetterInClaimConnectionLostIsTransient: a claim whose dead_letter
// statement (run inside the claim's transaction for rows past
// max_attempts) loses its connection is rolled back as a whole, so it may
// be tried again: its error must be transient, or the engine fails the
// loop on a dropped connection (as it did with the mysql driver).
func TestDeadLetterInClaimConnectionLostIsTransient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, postgres.Config{})
	table := h.schema + ".dropping"
	if _, err := h.admin.Exec(t.Context(), `CREATE TABLE `+table+` (id int PRIMARY KEY, status text NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0);
		INSERT INTO `+table+` (id, attempts) VALUES (1, 5)`); err != nil {
		t.Fatal(err)
	}
	spec := cursor.Spec{Kind: "postgres", Credential: h.base, Scope: map[string]any{"table": table}, MaxAttempts: 2,
		Claim: mustTemplate(t, `UPDATE {{ table }} SET status = 'claimed', attempts = attempts + 1
			WHERE id IN (SELECT id FROM {{ table }} WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }}) RETURNING id, attempts`),
		// The connection drops inside the claim's transaction, every time.
		Options: map[string]any{"dead_letter": `SELECT pg_terminate_backend(pg_backend_pid())`},
	}
	cur := openCursor(t, h, spec)
	claim, err := cur.Claim(t.Context(), 10)
	if err == nil {
		_ = claim.Abort(t.Context())
		t.Fatal("Claim succeeded; want the dropped connection's error")
	}
	if !cursor.Transient(err) {
		t.Fatalf("Claim: %v is not transient; a dead_letter that lost its connection was rolled back with the claim, which may run again", err)
	}
}
