package s3prefix_test

import (
	"context"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/internal/deadtest"
	"github.com/cursorflow/cursorflow/drivers/s3prefix"
	"github.com/cursorflow/cursorflow/internal/drivertest"
)

// TestClaimReportsDead: the object released with its last allowed
// delivery is moved to the dead prefix by the next claim, which lists it
// in Claim.Dead; the engine learns of it from nothing else.
func TestClaimReportsDead(t *testing.T) {
	for name, h := range map[string]func(testing.TB, s3prefix.Config) *harness{"Mem": newMemHarness, "S3": newS3Harness} {
		t.Run(name, func(t *testing.T) {
			h := h(t, s3prefix.Config{})
			spec, names := h.NewQueue(t, 2, cursortest.QueueOptions{MaxAttempts: 2})
			// The marker counts deliveries run; burying is not one.
			deadtest.ExpectClaimDead(t, h.drv, spec, names, func(ran int) int { return ran },
				func() []string { return h.DeadLettered(t, spec) })
		})
	}
}

// TestPlaybookCountsDeadObjects drains objects whose body fails for every
// 50th (deadtest.Drain), in a memblob bucket and on the S3 server: each
// of those fails max_attempts times and is then moved to the dead prefix
// by the next claim, which the loop must count as dead, one row each.
func TestPlaybookCountsDeadObjects(t *testing.T) {
	t.Run("Mem", func(t *testing.T) {
		mem := memblob.OpenBucket(nil)
		cfg := s3prefix.Config{OpenBucket: func(context.Context, string) (*blob.Bucket, error) { return mem, nil }}
		drainDead(t, cfg, mem, "mem://dead", "dead/")
	})
	t.Run("S3", func(t *testing.T) {
		admin, raw, root := s3Root(t, "e2e-dead-")
		drainDead(t, s3prefix.Config{}, admin, raw, root)
	})
}

func drainDead(t *testing.T, cfg s3prefix.Config, admin *blob.Bucket, bucketURL, root string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := &harness{admin: admin, root: root}
	qroot, names := h.newQueue(t, deadtest.Rows, nil)
	deadtest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/dead_drain.yaml",
		Kind:         "s3prefix",
		Driver:       s3prefix.New(cfg),
		Workload:     map[string]any{"bucket_url": bucketURL, "prefix": qroot + "pending/"},
	}, names, func() []string { return h.list(t, qroot+"dead/") })
}
