// Package s3bucket opens gocloud s3:// buckets whose HTTP client gives up
// on a server that accepts a request and never answers.
//
// gocloud's s3blob URL opener builds its S3 client with the AWS SDK's
// default HTTP client, which bounds dialling and the TLS handshake but
// waits for a response's headers forever: a claim against an endpoint
// that accepts connections and stays silent never returns. Open builds
// the bucket as gocloud does (the same URL parameters) and then swaps in
// a client whose transport also bounds the wait for response headers.
// The transfer of a body, once its headers came, stays unbounded.
package s3bucket

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// DefaultResponseHeaderTimeout is how long a request waits for the
// response's headers when Open is given no timeout.
const DefaultResponseHeaderTimeout = 30 * time.Second

// Open opens the s3:// bucket u names with gocloud's s3blob URL opener,
// with an HTTP client whose transport waits at most headerTimeout (zero
// or less: DefaultResponseHeaderTimeout) for a response's headers. Dial
// and TLS handshake timeouts are the AWS SDK's (30s and 10s).
func Open(ctx context.Context, u *url.URL, headerTimeout time.Duration) (*blob.Bucket, error) {
	if headerTimeout <= 0 {
		headerTimeout = DefaultResponseHeaderTimeout
	}
	opener := &s3blob.URLOpener{}
	b, err := opener.OpenBucketURL(ctx, u)
	if err != nil {
		return nil, err
	}
	var cli *s3.Client
	if !b.As(&cli) {
		_ = b.Close()
		return nil, fmt.Errorf("s3 bucket %s: gocloud's bucket holds no S3 client", u.Host)
	}
	// The opener read the URL into the client's options and its own
	// (encryption, checksums): rebuild the client from those options with
	// another HTTP client, and the bucket from the opener's options.
	o := cli.Options()
	o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.ResponseHeaderTimeout = headerTimeout
	})
	if err := b.Close(); err != nil {
		return nil, err
	}
	return s3blob.OpenBucket(ctx, s3.New(o), u.Host, &opener.Options)
}
