// Package resulttest gives tests result stores under a prefix of their
// own, so that tests sharing the test environment's S3 bucket never see
// each other's objects and leave none behind.
package resulttest

import (
	"context"
	"errors"
	"io"
	"net/url"
	"testing"

	"gocloud.dev/blob"

	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"
)

// WithPrefix returns the result store URL raw with prefix as its
// result_prefix (resultstoreurl.PrefixParam).
func WithPrefix(t testing.TB, raw, prefix string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(resultstoreurl.PrefixParam, prefix)
	u.RawQuery = q.Encode()
	return u.String()
}

// S3 returns the test environment's S3 bucket (testenv.S3: skipped
// locally, failing under CI when it is not set) as a result store URL
// with a fresh prefix named after name, whose objects are deleted when
// the test ends.
func S3(t testing.TB, name string) string {
	t.Helper()
	raw := testenv.S3(t)
	prefix := name + "-" + testenv.RandomSuffix(t) + "/"
	DeleteAfter(t, raw, prefix)
	return WithPrefix(t, raw, prefix)
}

// DeleteAfter deletes the objects under prefix in the bucket raw when
// the test ends; a failure to do so is logged.
func DeleteAfter(t testing.TB, raw, prefix string) {
	t.Cleanup(func() {
		ctx := context.Background()
		b, err := blob.OpenBucket(ctx, raw)
		if err != nil {
			t.Logf("clean up %s: %v", prefix, err)
			return
		}
		defer b.Close()
		it := b.List(&blob.ListOptions{Prefix: prefix})
		for {
			obj, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Logf("clean up %s: %v", prefix, err)
				return
			}
			_ = b.Delete(ctx, obj.Key)
		}
	})
}
