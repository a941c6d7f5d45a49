package s3prefix

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestClaimFinishesACopiedMove: an Ack's move is a copy to the done
// prefix, then deletes; a claimer that dies between the copy and the
// delete of the pending object leaves the done marker as the row's latest
// state and the object in both prefixes. The next claim must finish the
// move (nothing delivered again, nothing left behind), also for a name
// whose last segment is 250 bytes, which versitygw's posix backend cannot
// overwrite: the copy onto the one that landed fails there.
func TestClaimFinishesACopiedMove(t *testing.T) {
	t.Run("Mem", func(t *testing.T) {
		mem := memblob.OpenBucket(nil)
		cfg := Config{OpenBucket: func(context.Context, string) (*blob.Bucket, error) { return mem, nil }}
		finishCopiedMove(t, cfg, mem, "mem://finish", "finish/")
	})
	t.Run("S3", func(t *testing.T) {
		raw := testenv.S3(t)
		admin, err := blob.OpenBucket(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		root := "finish-" + testenv.RandomSuffix(t) + "/"
		t.Cleanup(func() {
			ctx := context.Background()
			it := admin.List(&blob.ListOptions{Prefix: root})
			for {
				o, err := it.Next(ctx)
				if err != nil {
					break
				}
				_ = admin.Delete(ctx, o.Key)
			}
			_ = admin.Close()
		})
		finishCopiedMove(t, Config{}, admin, raw, root)
	})
}

func finishCopiedMove(t *testing.T, cfg Config, admin *blob.Bucket, bucketURL, root string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv := New(cfg)
	defer drv.Close()
	names := []string{strings.Repeat("N", 245) + ".json", "a.json"} // in listing order
	spec := cursor.Spec{Kind: "s3prefix", Credential: bucketURL, Options: map[string]any{"prefix": root + "pending/"}, Lease: time.Minute}
	cur, err := drv.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	c := cur.(*Cursor)
	for _, n := range names {
		body := []byte(`{"name": "` + n[:1] + `"}`)
		for _, key := range []string{root + "pending/" + n, root + "done/" + n} {
			if err := admin.WriteAll(ctx, key, body, nil); err != nil {
				t.Fatalf("put %s: %v", key, err)
			}
		}
		// The claim and the Ack that preceded the death.
		for gen, st := range []string{stateLeased, stateDone} {
			if _, err := c.create(ctx, n, int64(gen+1), marker{State: st, Attempt: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}

	cl, err := c.Claim(ctx, 10)
	if err != nil {
		t.Fatalf("claim after a move that died half-way: %v", err)
	}
	if len(cl.Rows) != 0 {
		t.Fatalf("claim delivered %d rows of moves done already", len(cl.Rows))
	}
	if err := cl.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	list := func(prefix string) []string {
		var keys []string
		it := admin.List(&blob.ListOptions{Prefix: root + prefix})
		for {
			o, err := it.Next(ctx)
			if err == io.EOF {
				return keys
			}
			if err != nil {
				t.Fatalf("list %s: %v", prefix, err)
			}
			keys = append(keys, strings.TrimPrefix(o.Key, root+prefix))
		}
	}
	if left := list("pending/"); len(left) != 0 {
		t.Errorf("left pending: %q", left)
	}
	if left := list("leases/"); len(left) != 0 {
		t.Errorf("markers left: %q", left)
	}
	if done := list("done/"); !slices.Equal(done, names) {
		t.Errorf("done prefix holds %q, want %q", done, names)
	}
}
