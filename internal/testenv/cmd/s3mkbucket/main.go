// Command s3mkbucket creates the S3 bucket that cursorflow's tests use and,
// with -verify, checks that the server arbitrates conditional writes: a PUT
// with If-None-Match: * must succeed once and answer 412 the second time.
//
// scripts/testenv runs it after starting versitygw. It speaks plain
// path-style S3 with AWS Signature Version 4 from the standard library, so it
// needs no SDK.
//
// Usage:
//
//	s3mkbucket -endpoint http://127.0.0.1:7070 -bucket cursorflow-test \
//	    -access-key cursorflow -secret-key cursorflow-secret [-region us-east-1] [-verify]
package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

func main() {
	var c client
	var bucket string
	var verify bool
	flag.StringVar(&c.endpoint, "endpoint", "http://127.0.0.1:7070", "S3 endpoint URL")
	flag.StringVar(&bucket, "bucket", "cursorflow-test", "bucket to create")
	flag.StringVar(&c.region, "region", "us-east-1", "signing region")
	flag.StringVar(&c.accessKey, "access-key", os.Getenv("AWS_ACCESS_KEY_ID"), "access key id (default $AWS_ACCESS_KEY_ID)")
	flag.StringVar(&c.secretKey, "secret-key", os.Getenv("AWS_SECRET_ACCESS_KEY"), "secret access key (default $AWS_SECRET_ACCESS_KEY)")
	flag.BoolVar(&verify, "verify", false, "check that If-None-Match: * PUTs are exclusive")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, &c, bucket, verify); err != nil {
		fmt.Fprintln(os.Stderr, "s3mkbucket:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c *client, bucket string, verify bool) error {
	if err := c.createBucket(ctx, bucket); err != nil {
		return err
	}
	if verify {
		return c.verifyConditionalPut(ctx, bucket)
	}
	return nil
}

// client signs path-style S3 requests with SigV4.
type client struct {
	endpoint  string
	region    string
	accessKey string
	secretKey string
	http      http.Client
	now       func() time.Time
}

// createBucket creates bucket, accepting that it already exists and is ours.
func (c *client) createBucket(ctx context.Context, bucket string) error {
	status, body, err := c.do(ctx, http.MethodPut, "/"+bucket, nil, nil)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	switch {
	case status/100 == 2:
		return nil
	case status == http.StatusConflict && strings.Contains(body, "BucketAlreadyOwnedByYou"):
		return nil
	default:
		return fmt.Errorf("create bucket %s: HTTP %d: %s", bucket, status, body)
	}
}

// errNotExclusive reports a server that let a second If-None-Match: * PUT win.
var errNotExclusive = errors.New("second PUT with If-None-Match: * succeeded; the server does not arbitrate conditional writes")

// verifyConditionalPut writes one probe object twice with If-None-Match: *
// and requires 2xx then 412, then deletes the probe.
func (c *client) verifyConditionalPut(ctx context.Context, bucket string) error {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("random probe name: %w", err)
	}
	key := "/" + bucket + "/.testenv-probe-" + hex.EncodeToString(rnd[:])
	hdr := http.Header{"If-None-Match": {"*"}}
	status, body, err := c.do(ctx, http.MethodPut, key, hdr, []byte("first"))
	if err != nil {
		return fmt.Errorf("first conditional PUT: %w", err)
	}
	if status/100 != 2 {
		return fmt.Errorf("first conditional PUT: HTTP %d: %s", status, body)
	}
	defer func() { _, _, _ = c.do(context.WithoutCancel(ctx), http.MethodDelete, key, nil, nil) }()
	status, body, err = c.do(ctx, http.MethodPut, key, hdr, []byte("second"))
	if err != nil {
		return fmt.Errorf("second conditional PUT: %w", err)
	}
	if status/100 == 2 {
		return errNotExclusive
	}
	if status != http.StatusPreconditionFailed {
		return fmt.Errorf("second conditional PUT: want HTTP 412, got %d: %s", status, body)
	}
	return nil
}

// do sends one signed request and returns its status and (truncated) body.
func (c *client) do(ctx context.Context, method, path string, hdr http.Header, payload []byte) (int, string, error) {
	u, err := url.Parse(strings.TrimRight(c.endpoint, "/") + path)
	if err != nil {
		return 0, "", fmt.Errorf("endpoint: %w", err)
	}
	var body io.Reader
	if payload != nil {
		body = strings.NewReader(string(payload))
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return 0, "", err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	c.sign(req, payload)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), nil
}

// sign adds SigV4 headers (x-amz-date, x-amz-content-sha256, Authorization)
// signing host, x-amz-content-sha256 and x-amz-date.
func (c *client) sign(req *http.Request, payload []byte) {
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	t := now().UTC()
	amzDate := t.Format("20060102T150405Z")
	day := t.Format("20060102")
	sum := sha256.Sum256(payload)
	payloadHash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)

	const signed = "host;x-amz-content-sha256;x-amz-date"
	canonical := strings.Join([]string{
		req.Method,
		req.URL.EscapedPath(),
		req.URL.RawQuery,
		"host:" + req.URL.Host + "\n" +
			"x-amz-content-sha256:" + payloadHash + "\n" +
			"x-amz-date:" + amzDate + "\n",
		signed,
		payloadHash,
	}, "\n")
	scope := day + "/" + c.region + "/s3/aws4_request"
	crSum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(crSum[:])

	key := hmacSHA256([]byte("AWS4"+c.secretKey), day)
	key = hmacSHA256(key, c.region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.accessKey+"/"+scope+
		", SignedHeaders="+signed+", Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}
