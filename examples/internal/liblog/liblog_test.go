package liblog_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cursorflow/cursorflow/examples/internal/liblog"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestRouted: after Install and Use, go-redis's line about a pool that
// cannot dial and the MySQL driver's line about a connection cut
// mid-handshake reach the slog logger, at debug level.
func TestRouted(t *testing.T) {
	var buf testenv.SyncBuffer
	liblog.Install()
	liblog.Use(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { liblog.Use(nil) })

	// Redis: a port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	_ = ln.Close()
	rc := redis.NewClient(&redis.Options{Addr: refused, MaxRetries: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rc.Ping(ctx).Err(); err == nil {
		t.Fatal("ping of a refused port succeeded")
	}
	_ = rc.Close()

	// MySQL: a server that accepts and hangs up at once.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	db, err := sql.Open("mysql", "u:p@tcp("+hang.Addr().String()+")/db")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("ping of a server that hangs up succeeded")
	}
	_ = db.Close()

	out := buf.String()
	for _, want := range []string{`level=DEBUG msg="redis: connection pool: failed to dial`, `level=DEBUG msg="mysql: `} {
		if !strings.Contains(out, want) {
			t.Errorf("the logger got no line %q; it got:\n%s", want, out)
		}
	}
	t.Logf("logged:\n%s", out)
}
