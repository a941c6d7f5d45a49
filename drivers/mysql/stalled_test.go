package mysql_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/mysql"
)

// TestStalledClaimIsTakenBack: a claimer that stalls with its claim open
// (a paused process, a frozen VM: its connection and claim transaction
// stay open, it never commits nor aborts) holds its rows only for the
// frame lease. Another worker's SKIP LOCKED claim gets nothing at first,
// then, once the stalled claim has sat idle for a lease, the same rows:
// the server closed the stalled connection and rolled the claim (and its
// mark) back. Before, the rows stayed locked for as long as the stalled
// process lived, and the drain the engine holds open for a lease after a
// lost attempt ended without them. The claim goes to the server as text
// with the timeout in its batch, as a prepared statement (bound params)
// followed by the mark, and as a prepared statement alone.
func TestStalledClaimIsTakenBack(t *testing.T) {
	tests := []struct {
		name    string
		claim   string
		options map[string]any
	}{
		{"claim and mark", `SELECT id, attempts + 1 AS attempts FROM q WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED`,
			map[string]any{"mark": markSQL}},
		{"bound params and mark", `SELECT id, attempts + 1 AS attempts FROM q WHERE status = ? ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`,
			map[string]any{"mark": markSQL, "claim_params": []any{"pending", "{{ __frame_max_rows }}"}}},
		{"bound params without mark", `SELECT id FROM q WHERE status = ? ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`,
			map[string]any{"claim_params": []any{"pending", "{{ __frame_max_rows }}"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, mysql.Config{})
			_, cred := h.newDatabase(t, 2)
			ctx := context.Background()
			options := map[string]any{"key": "id"}
			for k, v := range tt.options {
				options[k] = v
			}
			spec := cursor.Spec{Kind: "mysql", Auth: "mysql_test", Credential: cred, Claim: compile(t, tt.claim),
				Options: options, Lease: time.Second}

			stalled, err := h.drv.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer stalled.Close()
			// The server's idle clock starts at the claim's last statement,
			// after this and before Claim returns (under load, milliseconds
			// before): the rows are held for a lease from then.
			claimedAt := time.Now()
			held, err := stalled.Claim(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			// The stalled worker never settles its claim; when the test
			// ends its connection is long gone and the abort finds nothing.
			defer func() { _ = held.Abort(ctx) }()
			if got := keysOf(held.Rows); !reflect.DeepEqual(got, []string{"1", "2"}) {
				t.Fatalf("stalled claimer claimed %v, want [1 2]", got)
			}

			// Another worker, with a pool of its own.
			other := mysql.New(mysql.Config{})
			defer other.Close()
			cur, err := other.Open(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer cur.Close()
			claim := func() []string {
				t.Helper()
				c, err := cur.Claim(ctx, 10)
				if err != nil {
					t.Fatalf("claim: %v", err)
				}
				if err := c.Commit(ctx); err != nil {
					t.Fatalf("commit: %v", err)
				}
				return keysOf(c.Rows)
			}
			if got := claim(); len(got) != 0 {
				t.Fatalf("claimed %v while the stalled claim held them, want none", got)
			}
			deadline := claimedAt.Add(10 * spec.Lease)
			for {
				got := claim()
				if len(got) > 0 {
					waited := time.Since(claimedAt)
					if !reflect.DeepEqual(got, []string{"1", "2"}) {
						t.Fatalf("claimed %v after the stall, want [1 2]", got)
					}
					if waited < spec.Lease {
						t.Fatalf("claimed the stalled rows %v after the stalled claim, before its lease of %v", waited, spec.Lease)
					}
					t.Logf("rows taken back %v after the stalled claim", waited.Round(time.Millisecond))
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the stalled claim still holds its rows %v after it was made (lease %v)", time.Since(claimedAt).Round(time.Millisecond), spec.Lease)
				}
				time.Sleep(50 * time.Millisecond) // polling the server with a deadline
			}
		})
	}
}

func keysOf(rows []cursor.Row) []string {
	keys := []string{}
	for _, r := range rows {
		keys = append(keys, r.Key)
	}
	return keys
}

// TestIdleTimeoutSparesPooledConnections: the claim's idle transaction
// timeout stays set on the pooled connection, but it reaches only a
// connection idle inside a transaction. A connection that waits in the
// pool for longer than the lease after a committed claim is not closed by
// the server, and the ack then runs on it.
func TestIdleTimeoutSparesPooledConnections(t *testing.T) {
	h := newHarness(t, mysql.Config{MaxOpenConns: 1})
	name, cred := h.newDatabase(t, 2)
	ctx := context.Background()
	spec := cursor.Spec{Kind: "mysql", Auth: "mysql_test", Credential: cred,
		Claim:   compile(t, `SELECT id FROM q WHERE status = 'pending' ORDER BY id LIMIT {{ __frame_max_rows }} FOR UPDATE SKIP LOCKED`),
		Options: map[string]any{"key": "id", "mark": markSQL, "ack": `UPDATE q SET status = 'done' WHERE id IN ({{ keys | join(',') }})`},
		Lease:   time.Second}
	cur, err := h.drv.Open(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	c, err := cur.Claim(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	conns := func() []int64 { return h.connections(t, name) }
	before := conns()
	if len(before) != 1 {
		t.Fatalf("connections to %s: %v, want the pool's one", name, before)
	}
	// What outlives the lease here is an idle pooled connection: waiting
	// out the lease is the point of the test, not a synchronisation.
	time.Sleep(2*spec.Lease + 500*time.Millisecond)
	if after := conns(); !reflect.DeepEqual(after, before) {
		t.Fatalf("pooled connections %v became %v while idle outside a transaction", before, after)
	}
	if err := cur.Ack(ctx, c.Rows); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if after := conns(); !reflect.DeepEqual(after, before) {
		t.Fatalf("the ack ran on connections %v, want the pooled %v", after, before)
	}
	var done int
	if err := h.admin.QueryRowContext(ctx, `SELECT count(*) FROM `+name+`.q WHERE status = 'done'`).Scan(&done); err != nil || done != 2 {
		t.Fatalf("%d rows done (%v), want 2", done, err)
	}
}
