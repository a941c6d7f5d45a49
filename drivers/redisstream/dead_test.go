package redisstream_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/redisstream"
)

// TestDeadEntriesBuriedOnCommit: entries past max_attempts that a claim
// lists dead stay in the stream, pending, until the claim's Commit (which
// the engine calls once it recorded them dead): a claim that is aborted
// (its record failed) or dropped by its claimer (killed before the
// record; the lease lapses) leaves them for a later claim, which lists
// them dead again; its Commit puts each in the dead-letter stream once
// and acknowledges it.
func TestDeadEntriesBuriedOnCommit(t *testing.T) {
	h := newHarness(t, redisstream.Config{})

	// exhaust claims both entries of a fresh queue once and hands them back
	// (their body failed): with max_attempts 1 the next claim finds them
	// dead.
	exhaust := func(t *testing.T, lease time.Duration, opts map[string]any) (cursor.Spec, []string) {
		t.Helper()
		spec, ids := queue(t, h, 2, opts)
		spec.MaxAttempts, spec.Lease = 1, lease
		cur := openAt(t, h, spec, 0)
		rows, err := cursortest.ClaimCommitted(t.Context(), cur, 2)
		if err != nil || len(rows) != 2 {
			t.Fatalf("first claim: %d rows, %v; want 2", len(rows), err)
		}
		if err := cur.Release(t.Context(), rows); err != nil {
			t.Fatalf("Release: %v", err)
		}
		return spec, ids
	}

	t.Run("aborted", func(t *testing.T) {
		ctx := t.Context()
		spec, ids := exhaust(t, time.Minute, nil)
		cur := openAt(t, h, spec, 0)
		c := claimDead(t, cur, ids)
		if err := c.Abort(ctx); err != nil {
			t.Fatalf("Abort: %v", err)
		}
		expectUnburied(t, h, spec, ids)

		// The next claim, at once (Abort hands them back), lists them dead
		// again with the same delivery count: the aborted listing is not
		// counted as a delivery.
		again := claimDead(t, cur, ids)
		for i := range again.Dead {
			if got, was := again.Dead[i].Lease.Attempt, c.Dead[i].Lease.Attempt; got != was {
				t.Errorf("entry %s listed dead again at delivery %d, want %d as in the aborted claim", again.Dead[i].Key, got, was)
			}
		}
		if err := again.Commit(ctx); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		expectBuried(t, h, spec, ids, "2")
		expectNothingLeft(t, cur)
	})

	// delete_acked keeps the stream from growing: the entries buried
	// leave it as acked ones do (they stayed in it for ever).
	t.Run("delete_acked", func(t *testing.T) {
		ctx := t.Context()
		spec, ids := exhaust(t, time.Minute, map[string]any{"delete_acked": true})
		cur := openAt(t, h, spec, 0)
		if err := claimDead(t, cur, ids).Commit(ctx); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		expectBuried(t, h, spec, ids, "2")
		if n, err := h.admin.XLen(ctx, spec.Options["stream"].(string)).Result(); err != nil || n != 0 {
			t.Fatalf("stream holds %d entries after burying all with delete_acked (%v), want 0", n, err)
		}
	})

	t.Run("lease lapses", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		spec, ids := exhaust(t, 300*time.Millisecond, nil)
		// The claimer lists them dead and is killed before the engine's
		// record: it never commits, aborts or closes.
		dropped := claimDead(t, openAt(t, h, spec, 0), ids)
		expectUnburied(t, h, spec, ids)

		// Another claimer gets them once the lease ran out, dead again.
		other := openAt(t, h, spec, 1)
		var c *cursor.Claim
		for {
			got, err := other.Claim(ctx, 2)
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			if len(got.Rows) > 0 {
				t.Fatalf("Claim returned rows %v past max_attempts 1", keys(got.Rows))
			}
			if len(got.Dead) > 0 {
				c = got
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("the dropped claim's dead entries never came back")
			case <-time.After(50 * time.Millisecond): // the lease lapsing, polled
			}
		}
		if got := keys(c.Dead); !slices.Equal(got, ids) {
			t.Fatalf("later claim lists %v dead, want %v", got, ids)
		}
		// The dropped claim, were its Commit to come late, buries nothing
		// that the later claim now holds.
		if err := dropped.Commit(ctx); !errors.Is(err, cursor.ErrStaleLease) {
			t.Fatalf("late Commit of the dropped claim: %v, want cursor.ErrStaleLease", err)
		}
		expectUnburied(t, h, spec, ids)
		if err := c.Commit(ctx); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		// The lapsed lease counted a delivery, as for any entry whose
		// claimer died.
		expectBuried(t, h, spec, ids, "3")
		expectNothingLeft(t, other)
	})
}

// openAt opens a cursor on spec for frame slot slot.
func openAt(t *testing.T, h *harness, spec cursor.Spec, slot int) cursor.Cursor {
	t.Helper()
	spec.SlotID = slot
	cur, err := h.drv.Open(t.Context(), spec)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = cur.Close() })
	return cur
}

// claimDead claims and expects a claim with no rows that lists ids dead.
func claimDead(t *testing.T, cur cursor.Cursor, ids []string) *cursor.Claim {
	t.Helper()
	c, err := cur.Claim(t.Context(), 2)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if len(c.Rows) != 0 || !slices.Equal(keys(c.Dead), ids) {
		t.Fatalf("Claim: rows %v, dead %v; want no rows and %v dead", keys(c.Rows), keys(c.Dead), ids)
	}
	return c
}

// expectUnburied fails unless ids are still in the stream and pending in
// the group, and the dead-letter stream is empty.
func expectUnburied(t *testing.T, h *harness, spec cursor.Spec, ids []string) {
	t.Helper()
	if dl := h.DeadLettered(t, spec); len(dl) != 0 {
		t.Fatalf("dead-letter stream holds %v before any claim listing them dead committed", dl)
	}
	if got := pendingIDs(t, h, spec); !slices.Equal(got, ids) {
		t.Fatalf("pending entries %v, want %v still pending", got, ids)
	}
}

// expectBuried fails unless the dead-letter stream holds each of ids once,
// delivered deliveries times, and none of them is pending any more.
func expectBuried(t *testing.T, h *harness, spec cursor.Spec, ids []string, deliveries string) {
	t.Helper()
	msgs, err := h.admin.XRange(t.Context(), spec.Options["stream"].(string)+":dead", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Values["cursorflow_id"].(string))
		if d := m.Values["cursorflow_deliveries"]; d != deliveries {
			t.Errorf("dead-letter entry %v: cursorflow_deliveries %v, want %s", m.Values["cursorflow_id"], d, deliveries)
		}
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("dead-letter stream holds %v, want %v once each", got, ids)
	}
	if p := pendingIDs(t, h, spec); len(p) != 0 {
		t.Fatalf("entries %v still pending after the Commit that buried them", p)
	}
}

// expectNothingLeft fails unless a claim finds neither rows nor dead.
func expectNothingLeft(t *testing.T, cur cursor.Cursor) {
	t.Helper()
	c, err := cur.Claim(t.Context(), 2)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	defer func() { _ = c.Abort(context.WithoutCancel(t.Context())) }()
	if len(c.Rows) != 0 || len(c.Dead) != 0 {
		t.Fatalf("claim after the dead letter: rows %v, dead %v; want neither", keys(c.Rows), keys(c.Dead))
	}
}

// pendingIDs lists the ids pending in the spec's group.
func pendingIDs(t *testing.T, h *harness, spec cursor.Spec) []string {
	t.Helper()
	p, err := h.admin.XPendingExt(t.Context(), &redis.XPendingExtArgs{
		Stream: spec.Options["stream"].(string), Group: "cursorflow:" + spec.LoopID, Start: "-", End: "+", Count: 100,
	}).Result()
	if err != nil {
		t.Fatalf("xpending: %v", err)
	}
	ids := make([]string, 0, len(p))
	for _, e := range p {
		ids = append(ids, e.ID)
	}
	return ids
}

func keys(rows []cursor.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}

// TestDeadBacklogLongerThanOneClaim: more overdue entries past
// max_attempts than one claim's rounds reach: the claim lists those it
// reached with More set (the engine claims again rather than take the
// stream as drained), and the next claim lists the rest, without More.
func TestDeadBacklogLongerThanOneClaim(t *testing.T) {
	h := newHarness(t, redisstream.Config{})
	ctx := t.Context()
	spec, ids := queue(t, h, 150, nil)
	spec.MaxAttempts, spec.Lease = 1, time.Minute
	cur := openAt(t, h, spec, 0)
	rows, err := cursortest.ClaimCommitted(ctx, cur, 150)
	if err != nil || len(rows) != 150 {
		t.Fatalf("first claim: %d rows, %v; want 150", len(rows), err)
	}
	if err := cur.Release(ctx, rows); err != nil {
		t.Fatalf("Release: %v", err)
	}
	var listed []string
	for i, want := range []struct {
		dead int
		more bool
	}{{100, true}, {50, false}} {
		c, err := cur.Claim(ctx, 1)
		if err != nil {
			t.Fatalf("claim %d: %v", i+1, err)
		}
		if len(c.Rows) != 0 || len(c.Dead) != want.dead || c.More != want.more {
			t.Fatalf("claim %d: %d rows, %d dead, More %v; want 0, %d, %v", i+1, len(c.Rows), len(c.Dead), c.More, want.dead, want.more)
		}
		for _, r := range c.Dead {
			listed = append(listed, r.Key)
		}
		if err := c.Commit(ctx); err != nil {
			t.Fatalf("claim %d: Commit: %v", i+1, err)
		}
	}
	slices.Sort(listed)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("listed dead %d entries, want each of the %d once", len(listed), len(want))
	}
	expectNothingLeft(t, cur)
}

// TestNoMoreWithoutDead: another claimer holds, within its lease, more
// entries than one claim's XAUTOCLAIM rounds scan (Redis scans at most ten
// per entry asked for, in each round), and nothing is new, overdue or
// dead. A claim then finds nothing and must not say More: the engine would
// claim again at once, find the same, and never let the slot drain, a
// loop that spins for as long as the other claimer holds its entries (each
// claim starts its scan over from the head of the pending list).
func TestNoMoreWithoutDead(t *testing.T) {
	h := newHarness(t, redisstream.Config{})
	ctx := t.Context()
	spec, _ := queue(t, h, 1100, nil)
	spec.MaxAttempts, spec.Lease = 3, time.Minute
	holder := openAt(t, h, spec, 1)
	held, err := cursortest.ClaimCommitted(ctx, holder, 1100)
	if err != nil || len(held) != 1100 {
		t.Fatalf("the other claimer's claim: %d rows, %v; want 1100", len(held), err)
	}
	cur := openAt(t, h, spec, 0)
	for i := range 2 {
		c, err := cur.Claim(ctx, 1)
		if err != nil {
			t.Fatalf("claim %d: %v", i+1, err)
		}
		if len(c.Rows) != 0 || len(c.Dead) != 0 || c.More {
			t.Fatalf("claim %d: %d rows, %d dead, More %v; want nothing and not More (the slot drains)",
				i+1, len(c.Rows), len(c.Dead), c.More)
		}
		if err := c.Commit(ctx); err != nil {
			t.Fatalf("claim %d: Commit: %v", i+1, err)
		}
	}
}
