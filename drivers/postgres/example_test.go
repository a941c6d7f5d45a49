package postgres_test

import (
	"context"
	"fmt"
	"os"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/postgres"
	"github.com/cursorflow/cursorflow/dsl"
)

// A host registers the driver under the kind its playbooks name; the
// engine opens a cursor per frame, renders the claim with
// __frame_max_rows and __worker_slot_id, claims, records the rows and
// commits the claim. Here one claim is
// driven by hand against DATABASE_URL (no output is checked: it needs a
// server).
func Example() {
	reg := cursor.NewRegistry()
	defer reg.Close()
	if err := reg.Register("postgres", postgres.New(postgres.Config{MaxConns: 8})); err != nil {
		fmt.Println(err)
		return
	}
	claimSQL, err := dsl.CompileTemplate(`WITH c AS (
		  SELECT id FROM jobs WHERE status = 'pending' ORDER BY id
		  FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
		UPDATE jobs j SET status = 'claimed', attempts = j.attempts + 1
		FROM c WHERE j.id = c.id RETURNING j.id, j.payload, j.attempts`, dsl.Pos{})
	if err != nil {
		fmt.Println(err)
		return
	}
	drv, _ := reg.Lookup("postgres")
	ctx := context.Background()
	cur, err := drv.Open(ctx, cursor.Spec{
		Kind: "postgres", Auth: "app_db", Credential: os.Getenv("DATABASE_URL"),
		Claim: claimSQL, Scope: map[string]any{}, LoopID: "drain#1", SlotID: 0, MaxAttempts: 3,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cur.Close()
	claim, err := cur.Claim(ctx, 100)
	if err != nil {
		fmt.Println(err) // names the alias app_db, never the URL
		return
	}
	// The claim's transaction is open until the engine has recorded the
	// rows; a process that dies before Commit leaves nothing claimed.
	if err := claim.Commit(ctx); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range claim.Rows {
		fmt.Println(r.Key, r.Values["payload"], r.Lease.Attempt)
	}
}
