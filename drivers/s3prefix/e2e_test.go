package s3prefix_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cursorflow/cursorflow/drivers/s3prefix"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
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

// TestPlaybookBinaryBodies drains objects of the S3 server with body_json,
// some of them not valid UTF-8, one of those a JSON object: the body must
// be given such an object's bytes in base64 with body_base64 set, as the
// package documents (body_base64 is the driver's flag, not an option, and
// body_json does not change it), and the claim must record the same
// value, so that a frame re-issued from the log runs on what the first
// run saw (the JSON object decoded, and was recorded, with U+FFFD in
// place of its invalid byte). Valid UTF-8 stays as it is.
func TestPlaybookBinaryBodies(t *testing.T) {
	admin, raw, root := s3Root(t, "e2e-binary-")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bodies := []string{"bin\xff\xfeok\x80", `{"s": "` + "\xff" + `"}`, `{"s": "café ☃"}`, "café ☃"}
	h := &harness{admin: admin, root: root}
	qroot, names := h.newQueue(t, len(bodies), func(i int) []byte { return []byte(bodies[i]) })

	var got drivertest.Bodies
	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/binary_drain.yaml",
		Kind:         "s3prefix",
		Driver:       s3prefix.New(s3prefix.Config{}),
		Workload:     map[string]any{"bucket_url": raw, "prefix": qroot + "pending/"},
		Tools:        map[string]tools.Tool{"body": got.Tool()},
	})
	drivertest.ExpectEachOnceOK(t, r.Events, names)

	// Sorted as drivertest sorts them.
	wantBody := []any{"Ymlu//5va4A=", "café ☃", "eyJzIjogIv8ifQ==", map[string]any{"s": "café ☃"}}
	if g := got.Values("body"); !reflect.DeepEqual(g, wantBody) {
		t.Errorf("the body was given body %q, want %q", g, wantBody)
	}
	if g := drivertest.ClaimedValues(t, r.Events, "body"); !reflect.DeepEqual(g, wantBody) {
		t.Errorf("frame.claimed recorded body %q, want %q", g, wantBody)
	}
	if g, want := got.Values("body_base64"), []any{false, false, true, true}; !reflect.DeepEqual(g, want) {
		t.Errorf("the body was given body_base64 %v, want %v", g, want)
	}
	wantError := []any{nil, "body is not valid UTF-8", "body is not valid UTF-8", "invalid character 'c' looking for beginning of value"}
	if g := drivertest.ClaimedValues(t, r.Events, "body_error"); !reflect.DeepEqual(g, wantError) {
		t.Errorf("frame.claimed recorded body_error %q, want %q", g, wantError)
	}
}
