package natslog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

func TestOptionsLog(t *testing.T) {
	var buf bytes.Buffer
	var o nats.Options
	for _, opt := range Options(slog.New(slog.NewTextHandler(&buf, nil))) {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	if o.DisconnectedErrCB == nil || o.ReconnectedCB == nil || o.ClosedCB == nil {
		t.Fatal("a handler is missing")
	}
	o.DisconnectedErrCB(nil, errors.New("connection reset"))
	o.ReconnectedCB(nil)
	out := buf.String()
	if !strings.Contains(out, "nats: disconnected; reconnecting") || !strings.Contains(out, "connection reset") || !strings.Contains(out, "nats: reconnected") {
		t.Fatalf("logged:\n%s", out)
	}
}

// TestCloseIsNotADisconnection closes a connection to a real NATS server
// the way a worker or server does when it shuts down: nats.go calls the
// disconnect handler then too, and the log said "disconnected;
// reconnecting" at warning level after "worker stopped", though nothing
// reconnects. A connection cut by the network is still a warning.
func TestCloseIsNotADisconnection(t *testing.T) {
	proxy := testenv.NewProxy(t, strings.TrimPrefix(testenv.NATS(t), "nats://"))
	var out testenv.SyncBuffer
	o := nats.GetDefaultOptions()
	o.Url = "nats://" + proxy.Addr()
	o.MaxReconnect = -1
	o.ReconnectWait = 10 * time.Millisecond
	for _, opt := range Options(slog.New(slog.NewTextHandler(&out, nil))) {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	// The handlers run in order on one goroutine: once these signal, the
	// ones before them have logged.
	reconnected, closed := make(chan struct{}, 1), make(chan struct{})
	logReconnect, logClosed := o.ReconnectedCB, o.ClosedCB
	o.ReconnectedCB = func(nc *nats.Conn) { logReconnect(nc); reconnected <- struct{}{} }
	o.ClosedCB = func(nc *nats.Conn) { logClosed(nc); close(closed) }
	nc, err := o.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	if n := proxy.DropConnections(); n != 1 {
		t.Fatalf("the proxy cut %d connections, want 1", n)
	}
	select {
	case <-reconnected:
	case <-time.After(10 * time.Second):
		t.Fatalf("no reconnection within 10s; logged:\n%s", out.String())
	}
	if got := strings.Count(out.String(), "nats: disconnected; reconnecting"); got != 1 {
		t.Fatalf("a cut connection logged %d disconnections, want 1:\n%s", got, out.String())
	}

	nc.Close()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the closed handler did not run within 10s")
	}
	if got := strings.Count(out.String(), "nats: disconnected; reconnecting"); got != 1 {
		t.Fatalf("closing the connection on purpose logged a disconnection with a reconnect:\n%s", out.String())
	}
}

// TestWhere: NATS URLs in messages keep host and user, never a password.
func TestWhere(t *testing.T) {
	t.Parallel()
	got := Where("nats://app:s3cret@a:4222, nats://b:4222")
	if got != "nats://app:xxxxx@a:4222,nats://b:4222" || strings.Contains(got, "s3cret") {
		t.Fatalf("Where = %q", got)
	}
}

// TestWhereHidesToken: a URL's user with no password is its token
// (nats.go sends it as auth_token), a secret as a password is.
func TestWhereHidesToken(t *testing.T) {
	t.Parallel()
	got := Where("nats://s3cretToken@a:4222,nats://app:pw@b:4222")
	if got != "nats://xxxxx@a:4222,nats://app:xxxxx@b:4222" || strings.Contains(got, "s3cretToken") {
		t.Fatalf("Where = %q", got)
	}
}

// TestConnectWaitsForTheServer starts a client before its NATS server
// answers, as a compose file or a cluster restart may order them: the
// first connections are refused, and Connect keeps trying until one is
// made, instead of failing the worker's or server's start.
func TestConnectWaitsForTheServer(t *testing.T) {
	proxy := testenv.NewProxy(t, strings.TrimPrefix(testenv.NATS(t), "nats://"))
	proxy.RefuseNext(3)
	var out testenv.SyncBuffer
	nc, err := Connect(t.Context(), "nats://"+proxy.Addr(), slog.New(slog.NewTextHandler(&out, nil)), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatalf("Connect: %v\n%s", err, out.String())
	}
	defer nc.Close()
	if !nc.IsConnected() {
		t.Fatalf("Connect returned a connection in state %v", nc.Status())
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("the connection does not work: %v", err)
	}
	if n := proxy.Accepted(); n < 4 {
		t.Fatalf("the proxy saw %d connections: want the 3 refused and one more", n)
	}
	if log := out.String(); !strings.Contains(log, "no server answers yet") || !strings.Contains(log, "nats: connected") {
		t.Fatalf("logged:\n%s", log)
	}
}

// TestConnectGivesUpWithItsContext: a server that never answers leaves
// Connect trying until its context ends (a SIGTERM during the start).
func TestConnectGivesUpWithItsContext(t *testing.T) {
	proxy := testenv.NewProxy(t, strings.TrimPrefix(testenv.NATS(t), "nats://"))
	proxy.RefuseNext(1 << 30)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		nc, err := Connect(ctx, "nats://"+proxy.Addr(), slog.New(slog.DiscardHandler), nats.ReconnectWait(10*time.Millisecond))
		if nc != nil {
			nc.Close()
		}
		done <- err
	}()
	// Wait until it has been refused a few times, then end its context.
	deadline := time.After(10 * time.Second)
	for proxy.Accepted() < 3 {
		select {
		case err := <-done:
			t.Fatalf("Connect returned %v while no server answered", err)
		case <-deadline:
			t.Fatalf("Connect tried %d times in 10s, want 3", proxy.Accepted())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Connect = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Connect did not return after its context ended")
	}
}
