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

// TestClaimKeepsAnObjectItCannotMove: on versitygw a 250-byte name reused
// after an earlier object of it was moved cannot be moved (the server
// does not overwrite the earlier one in the done prefix). The claim that
// finishes its move must fail, naming the copy, and leave the new object
// pending: taking the earlier object's bytes for its copy would delete
// the only copy of the new ones.
func TestClaimKeepsAnObjectItCannotMove(t *testing.T) {
	raw := testenv.S3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := blob.OpenBucket(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	root := "finish-stale-" + testenv.RandomSuffix(t) + "/"
	name := strings.Repeat("N", 245) + ".json"
	pending, done := root+"pending/"+name, root+"done/"+name
	t.Cleanup(func() {
		for _, k := range []string{pending, done} {
			_ = admin.Delete(context.Background(), k)
		}
	})
	drv := New(Config{})
	defer drv.Close()
	cur, err := drv.Open(ctx, cursor.Spec{Kind: "s3prefix", Credential: raw, Options: map[string]any{"prefix": root + "pending/"}, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c := cur.(*Cursor)
	if err := admin.WriteAll(ctx, done, []byte(`{"run": 1}`), nil); err != nil {
		t.Fatal(err)
	}
	if err := admin.WriteAll(ctx, pending, []byte(`{"run": 2}`), nil); err != nil {
		t.Fatal(err)
	}
	for gen, st := range []string{stateLeased, stateDone} {
		if _, err := c.create(ctx, name, int64(gen+1), marker{State: st, Attempt: 1}); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for gen := int64(1); gen <= 2; gen++ {
			_ = admin.Delete(context.Background(), markerKey(c.opts.LeasePrefix, name, gen))
		}
	}()
	if _, err := c.Claim(ctx, 10); err == nil || !strings.Contains(err.Error(), "copy "+pending) {
		t.Fatalf("claim finishing a move the server refuses: %v, want the copy's error", err)
	}
	if b, err := admin.ReadAll(ctx, pending); err != nil || string(b) != `{"run": 2}` {
		t.Fatalf("the object that could not move: %q, %v; want it pending as it was", b, err)
	}
}
