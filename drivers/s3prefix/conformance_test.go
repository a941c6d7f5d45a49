package s3prefix_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/s3prefix"
)

// TestConformanceS3 runs the suite against a real S3 server (versitygw
// in the test environment) through s3blob.
func TestConformanceS3(t *testing.T) {
	cursortest.Run(t, newS3Harness(t, s3prefix.Config{}))
}

// TestConformanceMem runs the suite against an in-process memblob bucket.
func TestConformanceMem(t *testing.T) {
	cursortest.Run(t, newMemHarness(t, s3prefix.Config{}))
}
