package redisstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/internal/deadtest"
	"github.com/cursorflow/cursorflow/drivers/redisstream"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name string
		spec cursor.Spec
		want string
	}{
		{"no stream", cursor.Spec{Credential: "redis://127.0.0.1:1", LoopID: "l"}, `option "stream" is required`},
		{"no group and no loop", cursor.Spec{Credential: "redis://127.0.0.1:1", Options: map[string]any{"stream": "s"}}, `option "group" is required`},
		{"bad credential", cursor.Spec{Credential: "redis://:hunter2@h:notaport", LoopID: "l", Options: map[string]any{"stream": "s"}}, "not a valid redis:// URL"},
		{"empty credential", cursor.Spec{LoopID: "l", Options: map[string]any{"stream": "s"}}, "empty credential"},
		{"unreachable", cursor.Spec{Credential: "redis://:hunter2@127.0.0.1:1/0", LoopID: "l", Options: map[string]any{"stream": "s"}}, "create group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := redisstream.New(redisstream.Config{})
			defer d.Close()
			tt.spec.Kind, tt.spec.Auth = "redisstream", "alias"
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := d.Open(ctx, tt.spec)
			var ce *cursor.ClaimError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open: %v, want a ClaimError containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q leaks the password", err)
			}
		})
	}
	d := redisstream.New(redisstream.Config{})
	_ = d.Close()
	_, err := d.Open(context.Background(), cursor.Spec{Credential: "redis://127.0.0.1:1", LoopID: "l", Options: map[string]any{"stream": "s"}})
	if !errors.Is(err, cursor.ErrClosed) {
		t.Fatalf("Open after Close: %v, want ErrClosed", err)
	}
}

// queue makes a stream with n entries and a spec on it.
func queue(t *testing.T, h *harness, n int, opts map[string]any) (cursor.Spec, []string) {
	t.Helper()
	stream := h.prefix + "_" + testenv.RandomSuffix(t) + ":jobs"
	h.mu.Lock()
	h.keys = append(h.keys, stream, stream+":dead")
	h.mu.Unlock()
	ids := fill(t, h.admin, stream, n)
	o := map[string]any{"stream": stream}
	for k, v := range opts {
		o[k] = v
	}
	return cursor.Spec{Kind: "redisstream", Credential: h.base, LoopID: "loop-" + t.Name(), Options: o, Lease: time.Minute}, ids
}

func TestCursorBehaviour(t *testing.T) {
	h := newHarness(t, redisstream.Config{})
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"values, lease and token", func(t *testing.T) {
			spec, ids := queue(t, h, 2, nil)
			cur, err := h.drv.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			rows, err := cursortest.ClaimCommitted(ctx, cur, 5)
			if err != nil || len(rows) != 2 {
				t.Fatalf("Claim: %d rows, %v", len(rows), err)
			}
			r := rows[0]
			if r.Key != ids[0] || r.Values["n"] != "1" || r.Values["name"] != "item 1" {
				t.Fatalf("row %+v", r)
			}
			if r.Lease.Attempt != 1 || r.Lease.Token != redisstream.Token(ids[0], 1) {
				t.Fatalf("lease %+v", r.Lease)
			}
			if d := r.Lease.Deadline.Sub(before); d < time.Minute-time.Second || d > time.Minute+time.Second {
				t.Fatalf("deadline %v after the claim, want about a minute", d)
			}
		}},
		{"start at $ skips existing entries", func(t *testing.T) {
			spec, _ := queue(t, h, 3, map[string]any{"start": "$"})
			cur, err := h.drv.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			if rows, err := cursortest.ClaimCommitted(ctx, cur, 5); err != nil || len(rows) != 0 {
				t.Fatalf("Claim: %d rows, %v; want none", len(rows), err)
			}
			id := h.admin.XAdd(ctx, &redis.XAddArgs{Stream: spec.Options["stream"].(string), Values: []any{"k", "v"}}).Val()
			rows, err := cursortest.ClaimCommitted(ctx, cur, 5)
			if err != nil || len(rows) != 1 || rows[0].Key != id {
				t.Fatalf("Claim: %+v, %v; want the new entry %s", rows, err, id)
			}
		}},
		{"delete_acked removes entries", func(t *testing.T) {
			spec, _ := queue(t, h, 4, map[string]any{"delete_acked": true})
			cur, err := h.drv.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := cursortest.ClaimCommitted(ctx, cur, 3)
			if err != nil || len(rows) != 3 {
				t.Fatalf("Claim: %d rows, %v", len(rows), err)
			}
			if err := cur.Ack(ctx, rows); err != nil {
				t.Fatal(err)
			}
			if n := h.admin.XLen(ctx, spec.Options["stream"].(string)).Val(); n != 1 {
				t.Fatalf("stream length %d after acking 3 of 4 with delete_acked, want 1", n)
			}
		}},
		{"a deleted group is recreated", func(t *testing.T) {
			spec, ids := queue(t, h, 2, map[string]any{"group": "g"})
			cur, err := h.drv.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.admin.XGroupDestroy(ctx, spec.Options["stream"].(string), "g").Err(); err != nil {
				t.Fatal(err)
			}
			rows, err := cursortest.ClaimCommitted(ctx, cur, 5)
			if err != nil || len(rows) != 2 || rows[0].Key != ids[0] {
				t.Fatalf("Claim after the group vanished: %+v, %v", rows, err)
			}
		}},
		{"groups are per loop by default", func(t *testing.T) {
			spec, ids := queue(t, h, 1, nil)
			for _, loop := range []string{"a", "b"} {
				spec.LoopID = loop
				cur, err := h.drv.Open(ctx, spec)
				if err != nil {
					t.Fatal(err)
				}
				rows, err := cursortest.ClaimCommitted(ctx, cur, 5)
				if err != nil || len(rows) != 1 || rows[0].Key != ids[0] {
					t.Fatalf("loop %s: %+v, %v; want the entry", loop, rows, err)
				}
			}
		}},
		{"a claim reports the entries it dead-letters", func(t *testing.T) {
			// The claim holds the entry past max_attempts and its Commit
			// buries it; the engine learns of it only from Claim.Dead.
			spec, ids := queue(t, h, 2, nil)
			spec.MaxAttempts = 2
			// The claim that lists it dead counts a delivery of its own.
			deadtest.ExpectClaimDead(t, h.drv, spec, ids, func(ran int) int { return ran + 1 },
				func() []string { return h.DeadLettered(t, spec) })
		}},
		{"malformed tokens are refused", func(t *testing.T) {
			spec, ids := queue(t, h, 1, nil)
			cur, err := h.drv.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []cursor.Row{
				{Key: ids[0], Lease: cursor.Lease{Token: "junk"}},
				{Key: ids[0], Lease: cursor.Lease{Token: "0-1#1"}},
			} {
				if err := cur.Ack(ctx, []cursor.Row{r}); err == nil || errors.Is(err, cursor.ErrStaleLease) {
					t.Fatalf("Ack with token %q: %v, want a malformed-token error", r.Lease.Token, err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// TestFinishNothingToRemove: Finish succeeds when the group, or the
// stream itself, is gone already (a second Finish, a deleted stream), and
// touches no group a cursor block names, nor any when there is no loop id.
func TestFinishNothingToRemove(t *testing.T) {
	rdb, base := admin(t)
	ctx := context.Background()
	stream := "finish_" + testenv.RandomSuffix(t) + ":jobs"
	t.Cleanup(func() { _ = rdb.Del(context.Background(), stream).Err() })
	d := redisstream.New(redisstream.Config{})
	t.Cleanup(func() { _ = d.Close() })
	spec := func(loopID string, opts map[string]any) cursor.Spec {
		return cursor.Spec{Kind: "redisstream", Credential: base, LoopID: loopID, Options: opts}
	}
	if err := d.Finish(ctx, spec("exec/start#1", map[string]any{"stream": stream})); err != nil {
		t.Fatalf("finish on a stream that does not exist: %v", err)
	}
	if err := rdb.XGroupCreateMkStream(ctx, stream, "named", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []cursor.Spec{
		spec("exec/start#1", map[string]any{"stream": stream}),
		spec("exec/start#1", map[string]any{"stream": stream, "group": "named"}),
		spec("", map[string]any{"stream": stream}),
	} {
		if err := d.Finish(ctx, s); err != nil {
			t.Fatalf("finish %v: %v", s.Options, err)
		}
	}
	groups, err := rdb.XInfoGroups(ctx, stream).Result()
	if err != nil || len(groups) != 1 || groups[0].Name != "named" {
		t.Fatalf("groups %+v (err %v), want the named one left", groups, err)
	}
}
