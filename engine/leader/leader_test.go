package leader_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cursorflow/cursorflow/engine/leader"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

func setup(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := testenv.Postgres(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := fmt.Sprintf("leader_%08x", rand.Uint32())
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		pool.Close()
	})
	return pool, schema
}

func newLease(t *testing.T, pool *pgxpool.Pool, schema, owner string) *leader.Lease {
	t.Helper()
	l, err := leader.New(context.Background(), leader.Config{Pool: pool, Schema: schema, Owner: owner, TTL: time.Second, RenewEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// campaign runs l in the background; leading receives a value each time
// it starts leading, and the returned stop ends Run.
func campaign(l *leader.Lease) (leading chan context.Context, stop func()) {
	leading = make(chan context.Context, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.Run(ctx, func(lctx context.Context) {
			leading <- lctx
			<-lctx.Done()
		})
	}()
	return leading, func() { cancel(); <-done }
}

func wait(t *testing.T, ch chan context.Context, within time.Duration) context.Context {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(within):
		t.Fatalf("no leadership within %s", within)
		return nil
	}
}

func TestOneLeaderAndHandover(t *testing.T) {
	t.Parallel()
	pool, schema := setup(t)
	a, b := newLease(t, pool, schema, "a"), newLease(t, pool, schema, "b")
	la, stopA := campaign(a)
	wait(t, la, 3*time.Second)
	lb, stopB := campaign(b)
	defer stopB()
	select {
	case <-lb:
		t.Fatal("b leads while a holds the lease")
	case <-time.After(1500 * time.Millisecond): // longer than the TTL: a renews
	}
	if !a.Held() || b.Held() {
		t.Fatalf("held: a=%v b=%v", a.Held(), b.Held())
	}
	owner, _, err := a.Holder(context.Background())
	if err != nil || owner != "a" {
		t.Fatalf("holder %q %v", owner, err)
	}
	// A graceful stop releases the lease: when Run has returned, the row
	// has expired (or b, polling, holds it already), so b need not wait
	// out a's TTL. Read from the row, not timed: a loaded machine can
	// delay b's next poll however long it likes.
	stopA()
	var owner2 string
	var expired bool
	if err := pool.QueryRow(context.Background(), "SELECT owner, expires_at <= now() FROM "+schema+".leases").Scan(&owner2, &expired); err != nil {
		t.Fatal(err)
	}
	if owner2 == "a" && !expired {
		t.Fatal("a's lease still runs after its Run returned: a graceful stop must release it")
	}
	wait(t, lb, 10*time.Second)
	if a.Held() || !b.Held() {
		t.Fatalf("held after handover: a=%v b=%v", a.Held(), b.Held())
	}
}

func TestTakeoverDeposesAndFences(t *testing.T) {
	t.Parallel()
	pool, schema := setup(t)
	a := newLease(t, pool, schema, "a")
	la, stopA := campaign(a)
	defer stopA()
	lctx := wait(t, la, 3*time.Second)
	log := a.Fence(eventlog.NewMemory())
	if log == nil {
		t.Fatal("Fence returned nil while leading")
	}
	ev := []eventlog.Event{{ExecutionID: "x", Type: eventlog.TypeExecutionStarted}}
	if _, err := log.Append(context.Background(), ev); err != nil {
		t.Fatalf("append while leading: %v", err)
	}
	// Someone else holds the row now (as after a's lease expired while it
	// was paused): a's next renewal is refused and it steps down.
	if _, err := pool.Exec(context.Background(), "UPDATE "+schema+".leases SET owner = 'intruder', token = token + 1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("a kept leading after the takeover")
	}
	if _, err := log.Append(context.Background(), ev); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("append after losing the lease: %v, want ErrNotLeader", err)
	}
	// The intruder never renews: a leads again once the row expired.
	lctx = wait(t, la, 3*time.Second)
	if lctx.Err() != nil || !a.Held() {
		t.Fatal("a did not lead again")
	}
	if _, err := log.Append(context.Background(), ev); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("the old term's fence let an append through: %v", err)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	if _, err := leader.New(context.Background(), leader.Config{}); err == nil {
		t.Fatal("want an error without Pool")
	}
}

// TestFencedAppendIsCheckedInTheDatabase: a leader whose lease was taken
// over behind its back — its own deadline not yet passed, as after a long
// pause — can append nothing: the append's transaction checks the lease
// token. Before, the fence only checked the leader's own clock, and the
// late append was stored.
func TestFencedAppendIsCheckedInTheDatabase(t *testing.T) {
	t.Parallel()
	pool, schema := setup(t)
	ctx := context.Background()
	log, err := postgres.New(ctx, pool, postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	a, err := leader.New(ctx, leader.Config{Pool: pool, Schema: schema, Owner: "a", TTL: 30 * time.Second, RenewEvery: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	leading, stop := campaign(a)
	defer stop()
	wait(t, leading, 5*time.Second)
	f := a.Fence(log)
	if f == nil {
		t.Fatal("no fence while leading")
	}
	ev := func(typ string) []eventlog.Event {
		return []eventlog.Event{{ExecutionID: "x", Type: typ}}
	}
	if _, err := f.Append(ctx, ev(eventlog.TypeExecutionStarted)); err != nil {
		t.Fatalf("the leader's append: %v", err)
	}
	// Another replica takes the lease over (its token is the next one).
	if _, err := pool.Exec(ctx, `UPDATE `+schema+`.leases SET owner = 'b', token = token + 1, expires_at = now() + interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Append(ctx, ev(eventlog.TypeStepCompleted)); !errors.Is(err, leader.ErrNotLeader) {
		t.Fatalf("deposed leader's append: %v, want ErrNotLeader", err)
	}
	evs, err := log.Read(ctx, "x", 0, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("the log holds %d events (%v), want only the leader's first", len(evs), err)
	}
}

// TestStandbySaysWhoLeads: a replica that cannot take the lease says once
// which replica holds it (a restarted server waiting out its own old
// lease said nothing until it led), not at every poll.
func TestStandbySaysWhoLeads(t *testing.T) {
	t.Parallel()
	pool, schema := setup(t)
	a := newLease(t, pool, schema, "a")
	la, stopA := campaign(a)
	defer stopA()
	wait(t, la, 3*time.Second)
	var out testenv.SyncBuffer
	b, err := leader.New(context.Background(), leader.Config{Pool: pool, Schema: schema, Owner: "b", TTL: time.Second,
		RenewEvery: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&out, nil))})
	if err != nil {
		t.Fatal(err)
	}
	lb, stopB := campaign(b)
	defer stopB()
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(out.String(), "standing by") {
		if time.Now().After(deadline) {
			t.Fatalf("the standby never said who leads; its log:\n%s", out.String())
		}
		select {
		case <-lb:
			t.Fatal("b leads while a holds the lease")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Several more polls (50 ms each) while a renews.
	select {
	case <-lb:
		t.Fatal("b leads while a holds the lease")
	case <-time.After(400 * time.Millisecond):
	}
	log := out.String()
	if n := strings.Count(log, "standing by"); n != 1 || !strings.Contains(log, "holder=a") {
		t.Fatalf("standby log (said %d times, want once, naming holder a):\n%s", n, log)
	}
}
