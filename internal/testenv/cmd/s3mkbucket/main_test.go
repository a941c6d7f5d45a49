package main

import (
	"net/url"
	"os"
	"testing"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestAgainstServer creates the bucket (idempotently) and checks exclusive
// conditional writes on the S3 server that scripts/testenv configured.
func TestAgainstServer(t *testing.T) {
	u, err := url.Parse(testenv.S3(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	c := &client{
		endpoint:  q.Get("endpoint"),
		region:    q.Get("region"),
		accessKey: os.Getenv("AWS_ACCESS_KEY_ID"),
		secretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
	}
	for range 2 { // the second run meets an existing bucket
		if err := run(t.Context(), c, u.Host, true); err != nil {
			t.Fatal(err)
		}
	}
	bad := *c
	bad.secretKey = "wrong"
	if err := run(t.Context(), &bad, u.Host, false); err == nil {
		t.Fatal("a request signed with the wrong secret was accepted")
	}
}
