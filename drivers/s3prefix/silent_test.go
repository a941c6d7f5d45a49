package s3prefix_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/s3prefix"
)

// silentServer listens on a local port, accepts every connection and
// never answers; it returns the listener's address.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// A claim against an S3 endpoint that accepts connections and never
// answers fails, as a transient failure naming the credential's alias,
// instead of hanging.
func TestClaimSilentEndpoint(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "silent-test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "silent-test-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	addr := silentServer(t)
	drv := s3prefix.New(s3prefix.Config{ResponseHeaderTimeout: 200 * time.Millisecond})
	defer drv.Close()
	// The wait is bounded by the test only so that a hang fails it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cred := "s3://bucket?endpoint=http://" + addr + "&region=us-east-1&use_path_style=true"
	cur, err := drv.Open(ctx, cursor.Spec{Kind: "s3prefix", Auth: "s3_queue", Credential: cred, LoopID: "l"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer cur.Close()
	start := time.Now()
	_, err = cur.Claim(ctx, 1)
	took := time.Since(start)
	switch {
	case err == nil:
		t.Fatal("claim against a silent endpoint succeeded")
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		t.Fatalf("claim hung until the test's deadline (%v): %v", took, err)
	case !cursor.Transient(err):
		t.Errorf("claim error is not transient (the engine would not retry it): %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "s3_queue") {
		t.Errorf("claim error does not name the alias s3_queue: %v", msg)
	}
	if strings.Contains(msg, "silent-test-secret") {
		t.Errorf("claim error shows the secret: %v", msg)
	}
	t.Logf("claim failed after %v: %v", took, err)
}
