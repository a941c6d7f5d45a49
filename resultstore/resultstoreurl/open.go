package resultstoreurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// directories, the embedded default
	_ "gocloud.dev/blob/memblob"  // mem://, one process
	_ "gocloud.dev/blob/s3blob"   // s3:// (AWS S3 and compatible servers)

	"github.com/cursorflow/cursorflow/internal/s3bucket"
	"github.com/cursorflow/cursorflow/resultstore"
)

// ErrUnsupportedURL is wrapped by Open's error for a URL it cannot open.
var ErrUnsupportedURL = errors.New("resultstoreurl: unsupported result store URL")

// Query parameters Open reads (and removes before opening the bucket).
const (
	// PrefixParam sets resultstore.Config.Prefix.
	PrefixParam = "result_prefix"
	// ThresholdParam sets resultstore.Config.Threshold (bytes).
	ThresholdParam = "result_threshold"
)

// Open opens the store rawURL names:
//
//	file:///var/lib/cursorflow/results   a directory (created if missing)
//	s3://bucket?region=...&endpoint=...  an S3 bucket (credentials from the
//	                                     AWS environment, never the URL); a
//	                                     request waits at most 30s for the
//	                                     response's headers
//	mem://                               in this process only
//
// ?result_prefix=P and ?result_threshold=BYTES set the store's key
// prefix and threshold; threshold, if not zero, overrides the URL's. A
// file:// URL gets gocloud's create_dir=1, metadata=skip and no_tmp_dir=1
// unless it sets them: each object is written to a temporary file beside
// it (NAME.*.tmp, left there if the process dies mid-write) and renamed
// into place; no_tmp_dir= (empty: gocloud reads any non-empty value as
// true) writes through os.TempDir instead. The caller closes the store.
func Open(ctx context.Context, rawURL string, threshold int64) (*resultstore.Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("%w: not a URL with a scheme (file://DIR, s3://BUCKET, mem://)", ErrUnsupportedURL)
	}
	q := u.Query()
	cfg := resultstore.Config{Prefix: q.Get(PrefixParam), Threshold: threshold}
	if v := q.Get(ThresholdParam); v != "" && threshold == 0 {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: %s=%q is not a byte count", ErrUnsupportedURL, ThresholdParam, v)
		}
		cfg.Threshold = n
	}
	q.Del(PrefixParam)
	q.Del(ThresholdParam)
	switch strings.ToLower(u.Scheme) {
	case "file":
		if u.Path == "" || u.Host != "" {
			return nil, fmt.Errorf("%w: a file URL names an absolute directory: file:///path", ErrUnsupportedURL)
		}
		if !q.Has("create_dir") {
			q.Set("create_dir", "1")
		}
		if !q.Has("metadata") {
			// Results need no sidecar attribute files.
			q.Set("metadata", "skip")
		}
		if !q.Has("no_tmp_dir") {
			// Each object is written to a temporary file and renamed into
			// place: beside it, not in os.TempDir, which may be another
			// file system (a tmpfs /tmp) where the rename fails ("invalid
			// cross-device link") and the bytes fill the wrong disk.
			q.Set("no_tmp_dir", "1")
		}
	case "mem", "s3":
	default:
		// Any driver the host registered with gocloud still opens.
	}
	u.RawQuery = q.Encode()
	var b *blob.Bucket
	if strings.EqualFold(u.Scheme, "s3") {
		// gocloud's opener waits for an answer forever: bound the wait
		// for a response's headers, not the transfer of a result.
		b, err = s3bucket.Open(ctx, u, 0)
	} else {
		b, err = blob.OpenBucket(ctx, u.String())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: open %s:// bucket: %w", ErrUnsupportedURL, u.Scheme, err)
	}
	cfg.Bucket = b
	cfg.URL = u.String()
	s, err := resultstore.New(cfg)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return s, nil
}
