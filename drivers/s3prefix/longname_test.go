package s3prefix_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cursorflow/cursorflow/drivers/s3prefix"
	"github.com/cursorflow/cursorflow/internal/drivertest"
)

// TestPlaybookDrainsLongNames drains objects whose names are valid but
// leave no room for the marker suffix (#<generation>) in their key: one
// whose last path segment is 255 bytes, the most a file-backed server
// (versitygw's posix backend, MinIO) takes, and one whose key is 1024
// bytes, S3's limit. Their lease markers used to fail with
// KeyTooLongError, which failed every claim that had no other row, so the
// loop never drained; every object must now be done, once.
func TestPlaybookDrainsLongNames(t *testing.T) {
	t.Run("Mem", func(t *testing.T) {
		mem := memblob.OpenBucket(nil)
		cfg := s3prefix.Config{OpenBucket: func(context.Context, string) (*blob.Bucket, error) { return mem, nil }}
		drainLongNames(t, cfg, mem, "mem://long", "long/")
	})
	t.Run("S3", func(t *testing.T) {
		admin, raw, root := s3Root(t, "e2e-long-")
		drainLongNames(t, s3prefix.Config{}, admin, raw, root)
	})
}

func drainLongNames(t *testing.T, cfg s3prefix.Config, admin *blob.Bucket, bucketURL, root string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := &harness{admin: admin, root: root}
	pending := root + "q1/pending/"
	deep := strings.Repeat(strings.Repeat("d", 200)+"/", 4)
	deep += strings.Repeat("D", 1024-len(pending)-len(deep)-len(".json")) + ".json"
	names := []string{
		"a.json",
		strings.Repeat("N", 250) + ".json",
		deep,
		"z.json",
	}
	for _, n := range names {
		if err := admin.WriteAll(ctx, pending+n, []byte(`{"n": 1}`), nil); err != nil {
			t.Fatalf("put %d-byte key: %v", len(pending+n), err)
		}
	}
	slices.Sort(names)

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: playbookPath,
		Kind:         "s3prefix",
		Driver:       s3prefix.New(cfg),
		Workload:     map[string]any{"bucket_url": bucketURL, "prefix": pending},
	})
	if ls := r.Loop; ls.Rows != len(names) || ls.OK != len(names) {
		t.Fatalf("loop status %+v, want %d rows, all ok", ls, len(names))
	}
	drivertest.ExpectEachOnceOK(t, r.Events, names)
	if left := h.list(t, pending); len(left) != 0 {
		t.Fatalf("objects left pending: %q", left)
	}
	if left := h.list(t, root+"q1/leases/"); len(left) != 0 {
		t.Fatalf("lease markers left: %q", left)
	}
	if done := h.list(t, root+"q1/done/"); !slices.Equal(done, names) {
		t.Fatalf("done prefix holds %q, want %q", done, names)
	}
}
