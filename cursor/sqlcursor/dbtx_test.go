package sqlcursor

import (
	"context"
	"database/sql"
	"testing"

	_ "modernc.org/sqlite"
)

// TestDBTxRollbackOfAnEndedTransaction: a transaction database/sql ended
// already (as it does when BeginTx's context is cancelled) rolls back
// without an error, so aborting a stopping loop's claim made ahead is not
// reported as a failure; a live one still rolls back.
func TestDBTxRollbackOfAnEndedTransaction(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	wrapped := DBTx(tx, nil)
	if err := wrapped.Exec(ctx, `INSERT INTO t VALUES (1)`, nil); err != nil {
		t.Fatal(err)
	}
	if err := wrapped.Rollback(ctx); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if err := wrapped.Rollback(ctx); err != nil {
		t.Fatalf("rollback of an ended transaction: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows (%v): want the insert rolled back", n, err)
	}
}
