package s3prefix_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/s3prefix"
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
		cfg := s3prefix.Config{OpenBucket: func(context.Context, string) (*blob.Bucket, error) { return mem, nil }}
		finishCopiedMove(t, cfg, mem, "mem://finish", "finish/")
	})
	t.Run("S3", func(t *testing.T) {
		admin, raw, root := s3Root(t, "finish-")
		finishCopiedMove(t, s3prefix.Config{}, admin, raw, root)
	})
}

func finishCopiedMove(t *testing.T, cfg s3prefix.Config, admin *blob.Bucket, bucketURL, root string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := openHalfMoved(t, ctx, cfg, bucketURL, root)
	names := []string{strings.Repeat("N", 245) + ".json", "a.json"} // in listing order
	for _, n := range names {
		body := []byte(`{"name": "` + n[:1] + `"}`)
		leaveHalfMoved(t, ctx, admin, c, root, n, body, body)
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
	h := &harness{admin: admin, root: root}
	if left := h.list(t, root+"pending/"); len(left) != 0 {
		t.Errorf("left pending: %q", left)
	}
	if left := h.list(t, root+"leases/"); len(left) != 0 {
		t.Errorf("markers left: %q", left)
	}
	if done := h.list(t, root+"done/"); !slices.Equal(done, names) {
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
	admin, raw, root := s3Root(t, "finish-stale-")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := openHalfMoved(t, ctx, s3prefix.Config{}, raw, root)
	name := strings.Repeat("N", 245) + ".json"
	leaveHalfMoved(t, ctx, admin, c, root, name, []byte(`{"run": 2}`), []byte(`{"run": 1}`))

	pending := root + "pending/" + name
	if _, err := c.Claim(ctx, 10); err == nil || !strings.Contains(err.Error(), "copy "+pending) {
		t.Fatalf("claim finishing a move the server refuses: %v, want the copy's error", err)
	}
	if b, err := admin.ReadAll(ctx, pending); err != nil || string(b) != `{"run": 2}` {
		t.Fatalf("the object that could not move: %q, %v; want it pending as it was", b, err)
	}
}

// openHalfMoved opens a cursor on the pending prefix under root, closed
// with its driver when the test ends.
func openHalfMoved(t *testing.T, ctx context.Context, cfg s3prefix.Config, bucketURL, root string) *s3prefix.Cursor {
	t.Helper()
	drv := s3prefix.New(cfg)
	t.Cleanup(func() { _ = drv.Close() })
	cur, err := drv.Open(ctx, cursor.Spec{Kind: "s3prefix", Credential: bucketURL,
		Options: map[string]any{"prefix": root + "pending/"}, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return cur.(*s3prefix.Cursor)
}

// leaveHalfMoved leaves name as a claimer leaves it that died between
// its Ack's copy and its deletes: pending under the pending prefix,
// done under the done prefix (the same bytes, unless an earlier object of
// the name is there), and the done marker the latest.
func leaveHalfMoved(t *testing.T, ctx context.Context, admin *blob.Bucket, c *s3prefix.Cursor, root, name string, pending, done []byte) {
	t.Helper()
	for key, body := range map[string][]byte{root + "pending/" + name: pending, root + "done/" + name: done} {
		if err := admin.WriteAll(ctx, key, body, nil); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	if err := c.DiedMidMove(ctx, name); err != nil {
		t.Fatal(err)
	}
}
