package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/mysql"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestSilentServerConnectIsBounded: a server that accepts connections and
// never answers (a frozen process, a silent proxy) held a claim in the
// handshake for as long as its context lived, which for a cursor loop is
// for ever: `cursorflow run` with such a credential hung with no word.
// A new connection is bounded (Config.ConnectTimeout), and running out of
// it is a transient error (the engine tries the claim again, then fails
// the loop) that says what happened, never quoting the credential.
func TestSilentServerConnectIsBounded(t *testing.T) {
	h := newHarness(t, mysql.Config{ConnectTimeout: 300 * time.Millisecond})
	_, cred := h.newDatabase(t, 1)
	cfg, err := gomysql.ParseDSN(cred)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, cfg.Addr)
	proxy.Hole()
	cfg.Addr = proxy.Addr()
	cfg.Passwd = "hunter2"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur, err := h.drv.Open(ctx, cursor.Spec{Kind: "mysql", Auth: "q", Credential: cfg.FormatDSN(), Claim: compile(t, claimSQL),
		Options: map[string]any{"mark": markSQL}})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	claim, err := cur.Claim(ctx, 10)
	if err == nil {
		_ = claim.Abort(ctx)
		t.Fatal("Claim succeeded through a silent server")
	}
	if ctx.Err() != nil {
		t.Fatalf("Claim returned only when its context ended (%v): the connect was not bounded", err)
	}
	if !cursor.Transient(err) {
		t.Fatalf("Claim: %v is not transient", err)
	}
	if !strings.Contains(err.Error(), "no answer") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Claim: %q: want it to say the server did not answer, without the password", err)
	}
}
