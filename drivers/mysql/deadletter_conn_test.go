package mysql_test

import (
	"context"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/mysql"
)

// TestDeadLetterInClaimConnectionLostIsTransient: a claim whose dead_letter
// statement (run inside the claim's transaction for rows past max_attempts)
// loses its connection rolled back as a whole, so the claim may be tried
// again: its error must be transient, or the engine fails the loop on a
// dropped connection (seen as `claim: dead_letter of N rows past max
// attempts: invalid connection` when a claim's connection was KILLed).
func TestDeadLetterInClaimConnectionLostIsTransient(t *testing.T) {
	h := newHarness(t, mysql.Config{})
	name, cred := h.newDatabase(t, 0)
	ctx := context.Background()
	_, err := h.admin.ExecContext(ctx, `CREATE TABLE `+name+`.d (
		id int PRIMARY KEY, status varchar(8) NOT NULL DEFAULT 'pending', attempts int NOT NULL DEFAULT 0);
		INSERT INTO `+name+`.d (id, attempts) VALUES (1, 5)`)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := h.drv.Open(ctx, cursor.Spec{Kind: "mysql", Credential: cred, MaxAttempts: 2,
		Claim: compile(t, `SELECT id, attempts + 1 AS attempts FROM d WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED`),
		Options: map[string]any{
			"mark":        `UPDATE d SET status = 'claimed', attempts = attempts + 1 WHERE id IN ({{ keys | join(',') }})`,
			"dead_letter": `KILL CONNECTION_ID()`, // the connection drops inside the claim's transaction, every time
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	claim, err := cur.Claim(ctx, 10)
	if err == nil {
		_ = claim.Abort(ctx)
		t.Fatal("Claim succeeded; want the dropped connection's error")
	}
	if !cursor.Transient(err) {
		t.Fatalf("Claim: %v is not transient; a dead_letter that lost its connection was rolled back with the claim, which may run again", err)
	}
}
