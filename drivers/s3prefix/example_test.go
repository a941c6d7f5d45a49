package s3prefix_test

import (
	"context"
	"fmt"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/s3prefix"
)

// A host registers the driver once; here it drains an embedded memblob
// bucket by hand, the way the engine does for each frame.
func Example() {
	ctx := context.Background()
	mem := memblob.OpenBucket(nil)
	for _, name := range []string{"a.json", "b.json", "c.json"} {
		_ = mem.WriteAll(ctx, "jobs/pending/"+name, []byte(`{"job": "`+name+`"}`), nil)
	}

	reg := cursor.NewRegistry()
	_ = reg.Register("s3prefix", s3prefix.New(s3prefix.Config{
		// A host that owns the bucket hands it over; by default the
		// driver opens s3:// and mem:// URLs itself.
		OpenBucket: func(context.Context, string) (*blob.Bucket, error) { return mem, nil },
	}))
	defer reg.Close()

	drv, _ := reg.Lookup("s3prefix")
	cur, err := drv.Open(ctx, cursor.Spec{
		Kind:       "s3prefix",
		Credential: "mem://jobs",
		Options:    map[string]any{"prefix": "jobs/pending/", "read_body": true, "body_json": true},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cur.Close()
	for {
		claim, err := cur.Claim(ctx, 2)
		if err != nil || len(claim.Rows) == 0 {
			break
		}
		// The engine records the rows, then commits (a no-op here: the
		// lease markers already hold the objects).
		_ = claim.Commit(ctx)
		for _, r := range claim.Rows {
			fmt.Println(r.Key, r.Values["body"], "attempt", r.Lease.Attempt)
		}
		_ = cur.Ack(ctx, claim.Rows)
	}
	done, _, _ := mem.ListPage(ctx, blob.FirstPageToken, 10, &blob.ListOptions{Prefix: "jobs/done/"})
	fmt.Println(len(done), "objects in jobs/done/")
	// Output:
	// a.json map[job:a.json] attempt 1
	// b.json map[job:b.json] attempt 1
	// c.json map[job:c.json] attempt 1
	// 3 objects in jobs/done/
}
