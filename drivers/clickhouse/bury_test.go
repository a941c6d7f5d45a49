package clickhouse_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/clickhouse"
)

// TestBuryDecidesFromReadBack: a claim buries a row only when the
// read-back of its bury claim counts MaxAttempts deliveries, whatever the
// candidate query counted. That query's subqueries read the claims table
// each at its own moment, so a rival's claim made in between looks like a
// delivery there (not active yet, not withdrawn yet) although the rival
// then loses and withdraws: under load, ContendedPoison saw a row
// dead-lettered after deliveries [1 2] of 3.
//
// The test makes the candidate query's view deterministic: the row has
// two deliveries, and a rival claim that is no longer active (it expired)
// but not yet withdrawn, as a rival's claim is between the two
// subqueries; the rival withdraws after the bury claim is inserted and
// before it is read back (the driver's claim hook). The row must be
// delivered a third time, and buried only after that delivery.
func TestBuryDecidesFromReadBack(t *testing.T) {
	const maxAttempts = 3
	h := newHarness(t, clickhouse.Config{})
	var (
		once    sync.Once
		rival   = make(chan string, 1) // the rival claim's withdraw statement
		hookErr = make(chan error, 1)
	)
	clickhouse.SetClaimInserted(h.drv, func(string) {
		select {
		case stmt := <-rival:
			once.Do(func() { hookErr <- h.admin.Exec(context.Background(), stmt) })
		default:
		}
	})
	spec, keys := h.NewQueue(t, 1, cursortest.QueueOptions{MaxAttempts: maxAttempts})
	claims := spec.Options["table"].(string) + "_claims"
	ctx := t.Context()
	cur, err := h.drv.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()

	claimOne := func(want int) {
		t.Helper()
		c, err := cur.Claim(ctx, 1)
		if err != nil {
			t.Fatalf("claim %d: %v", want, err)
		}
		if len(c.Dead) != 0 {
			t.Fatalf("claim %d buried %v (attempt %d), want none: the row had %d deliveries of %d",
				want, keysOfRows(c.Dead), c.Dead[0].Lease.Attempt, want-1, maxAttempts)
		}
		if len(c.Rows) != 1 || c.Rows[0].Key != keys[0] || c.Rows[0].Lease.Attempt != want {
			t.Fatalf("claim %d returned %+v, want row %q with attempt %d", want, c.Rows, keys[0], want)
		}
		if err := c.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cur.Release(ctx, c.Rows); err != nil {
			t.Fatalf("release %d: %v", want, err)
		}
	}
	claimOne(1)
	claimOne(2)

	// The rival's claim: inserted a lease ago, expired, not withdrawn.
	now := time.Now().UnixMilli()
	at := now - time.Minute.Milliseconds()
	tok := strconv.FormatInt(at, 10) + "-00000000000000ff"
	insert := func(kind string, expires, at int64) string {
		return `INSERT INTO ` + claims + ` (key, token, kind, expires, at) SELECT '` + keys[0] + `', '` + tok + `', '` + kind +
			`', toUInt64(` + strconv.FormatInt(expires, 10) + `), toUInt64(` + strconv.FormatInt(at, 10) + `)`
	}
	if err := h.admin.Exec(ctx, insert("claim", now-1, at)); err != nil {
		t.Fatal(err)
	}
	rival <- insert("withdraw", 0, now)

	claimOne(3)
	select {
	case err := <-hookErr:
		if err != nil {
			t.Fatalf("withdraw the rival claim: %v", err)
		}
	default:
		t.Fatal("the rival claim was never withdrawn: no claim was inserted after it")
	}

	// Released after its last delivery: the next claim buries it.
	c, err := cur.Claim(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) != 0 || len(c.Dead) != 1 || c.Dead[0].Key != keys[0] || c.Dead[0].Lease.Attempt != maxAttempts {
		t.Fatalf("claim after the last delivery: rows %+v dead %+v, want row %q dead after %d deliveries",
			c.Rows, c.Dead, keys[0], maxAttempts)
	}
	// Recorded in the dead table once the engine recorded it dead.
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if dead := h.DeadLettered(t, spec); len(dead) != 1 || dead[0] != keys[0] {
		t.Fatalf("dead letter holds %v, want [%s]", dead, keys[0])
	}
}

func keysOfRows(rows []cursor.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}
