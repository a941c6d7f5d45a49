package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/dsl"
)

// A host registers the driver; the engine then opens a cursor per frame
// and claims rows. Here the claim is driven by hand.
func Example() {
	dir, err := os.MkdirTemp("", "cursorflow-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "jobs.db")

	// The queue: a table the playbook's own steps fill.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = db.Exec(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, payload TEXT, status TEXT DEFAULT 'pending', attempts INTEGER DEFAULT 0);
		INSERT INTO jobs (id, payload) VALUES (1, 'a'), (2, 'b'), (3, 'c')`)
	db.Close()
	if err != nil {
		fmt.Println(err)
		return
	}

	reg := cursor.NewRegistry()
	defer reg.Close()
	if err := reg.Register("sqlite", sqlite.New(sqlite.Config{})); err != nil {
		fmt.Println(err)
		return
	}

	// What the engine does for one frame of max_rows 2.
	claim, err := dsl.CompileTemplate(`UPDATE jobs SET status = 'claimed', attempts = attempts + 1
		WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }})
		RETURNING id, payload, attempts`, dsl.Pos{})
	if err != nil {
		fmt.Println(err)
		return
	}
	drv, _ := reg.Lookup("sqlite")
	ctx := context.Background()
	cur, err := drv.Open(ctx, cursor.Spec{
		Kind:       "sqlite",
		Auth:       "jobs_db",
		Credential: "sqlite:" + path,
		Claim:      claim,
		Options:    map[string]any{"ack": "UPDATE jobs SET status = 'done' WHERE id IN ({{ keys | join(',') }})"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cur.Close()
	for {
		claim, err := cur.Claim(ctx, 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		rows := claim.Rows
		if len(rows) == 0 {
			fmt.Println("drained")
			return
		}
		// The claim's transaction is still open: the engine records the
		// rows in its log, then commits.
		if err := claim.Commit(ctx); err != nil {
			fmt.Println(err)
			return
		}
		for _, r := range rows {
			fmt.Printf("key %s payload %v attempt %d\n", r.Key, r.Values["payload"], r.Lease.Attempt)
		}
		if err := cur.Ack(ctx, rows); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// key 1 payload a attempt 1
	// key 2 payload b attempt 1
	// key 3 payload c attempt 1
	// drained
}
