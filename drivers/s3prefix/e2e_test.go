package s3prefix_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cursorflow/cursorflow/drivers/s3prefix"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

const playbookPath = "../../examples/playbooks/s3prefix_drain.yaml"

// drainThroughEngine runs the example playbook on n objects under prefix
// in bucket (opened by the driver from bucketURL) and checks that every
// object ended in the done prefix exactly once.
func drainThroughEngine(t *testing.T, cfg s3prefix.Config, admin *blob.Bucket, bucketURL, root string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := &harness{admin: admin, root: root}
	qroot, names := h.newQueue(t, n, func(i int) []byte { return fmt.Appendf(nil, `{"n": %d}`, i+1) })

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: playbookPath,
		Kind:         "s3prefix",
		Driver:       s3prefix.New(cfg),
		Workload:     map[string]any{"bucket_url": bucketURL, "prefix": qroot + "pending/"},
	})
	if ls := r.Loop; ls.Rows != n || ls.OK != n {
		t.Fatalf("loop status %+v, want %d rows, all ok", ls, n)
	}
	if left := h.list(t, qroot+"pending/"); len(left) != 0 {
		t.Fatalf("%d objects left pending, e.g. %v", len(left), left[:min(5, len(left))])
	}
	if left := h.list(t, qroot+"leases/"); len(left) != 0 {
		t.Fatalf("%d lease markers left, e.g. %v", len(left), left[:min(5, len(left))])
	}
	done := h.list(t, qroot+"done/")
	if len(done) != n || done[0] != names[0] || done[n-1] != names[n-1] {
		t.Fatalf("done prefix holds %d objects, want %d", len(done), n)
	}
	r.LogRate(t, n, "objects")
}

// TestPlaybookDrainsMemBucket drains 10,000 objects of an embedded
// memblob bucket through the engine, four frames at a time.
func TestPlaybookDrainsMemBucket(t *testing.T) {
	mem := memblob.OpenBucket(nil)
	cfg := s3prefix.Config{OpenBucket: func(context.Context, string) (*blob.Bucket, error) { return mem, nil }}
	drainThroughEngine(t, cfg, mem, "mem://e2e", "e2e/", 10_000)
}

// TestPlaybookDrainsS3 drains objects of the real S3 server through the
// engine. versitygw's posix backend takes milliseconds per put (three
// puts per row: lease marker, done marker, copy), so this run is small:
// the conformance suite already drains 2,000 objects with 16 claimers.
func TestPlaybookDrainsS3(t *testing.T) {
	admin, raw, root := s3Root(t, "e2e-")
	n := 300
	drainThroughEngine(t, s3prefix.Config{}, admin, raw, root, n)
}

// s3Root opens the S3 server's bucket and returns it, its URL and a fresh
// root prefix (name plus a random suffix), deleted when the test ends.
func s3Root(t *testing.T, name string) (admin *blob.Bucket, raw, root string) {
	t.Helper()
	raw = testenv.S3(t)
	admin, err := blob.OpenBucket(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	root = name + testenv.RandomSuffix(t) + "/"
	t.Cleanup(func() {
		if err := deleteAll(context.Background(), admin, root); err != nil {
			t.Errorf("clean up: %v", err)
		}
		_ = admin.Close()
	})
	return admin, raw, root
}
