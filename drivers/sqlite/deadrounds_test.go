package sqlite_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/internal/drivertest"
)

// backlogQueue returns a queue whose rows 1..3 were delivered five times
// already (past max_attempts 2), followed by row 4, never delivered,
// unless drained.
func backlogQueue(t *testing.T, h *harness, drained bool) cursor.Spec {
	t.Helper()
	n := 4
	if drained {
		n = 3
	}
	spec, _ := h.NewQueue(t, n, cursortest.QueueOptions{MaxAttempts: 2})
	if _, err := h.db.ExecContext(t.Context(), `UPDATE `+drivertest.TableOf(spec)+` SET attempts = 5 WHERE id <= 3`); err != nil {
		t.Fatal(err)
	}
	return spec
}

// queueState returns the status and attempts of every row, in id order.
func queueState(t *testing.T, h *harness, spec cursor.Spec) []string {
	t.Helper()
	rows, err := h.db.QueryContext(context.Background(),
		`SELECT id || ':' || status || ':' || attempts FROM `+drivertest.TableOf(spec)+` ORDER BY id`)
	return drivertest.Strings(t, rows, err)
}

func keys(rows []cursor.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}

// TestBacklogPastMaxAttemptsBuriedOnCommitOnly: a claim of one row at a
// time meets three rows past max_attempts before a live one (or before
// the end of the queue): it buries them in rounds, and the claim that
// lists them dead moves them to the dead letter only when it commits.
// Aborting it (a record that failed) leaves the queue as it was, every
// round included, so that the next claim lists them dead again.
func TestBacklogPastMaxAttemptsBuriedOnCommitOnly(t *testing.T) {
	t.Parallel()
	for _, drained := range []bool{false, true} {
		name := "live row after"
		if drained {
			name = "drained"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			spec := backlogQueue(t, h, drained)
			before := queueState(t, h, spec)
			cur, err := h.drv.Open(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			defer cur.Close()
			var wantRows []string
			if !drained {
				wantRows = []string{"4"}
			}
			for _, commit := range []bool{false, true} {
				c, err := cur.Claim(t.Context(), 1)
				if err != nil {
					t.Fatalf("Claim: %v", err)
				}
				if got := keys(c.Dead); !slices.Equal(got, []string{"1", "2", "3"}) {
					t.Fatalf("claim lists %v dead, want [1 2 3]", got)
				}
				if got := keys(c.Rows); !slices.Equal(got, wantRows) && (len(got) > 0 || len(wantRows) > 0) {
					t.Fatalf("claim returned rows %v, want %v", got, wantRows)
				}
				if !commit {
					if err := c.Abort(t.Context()); err != nil {
						t.Fatalf("Abort: %v", err)
					}
					if after := queueState(t, h, spec); !slices.Equal(after, before) {
						t.Fatalf("after Abort the queue is %v, want it as before the claim %v: an aborted claim buried rows", after, before)
					}
					continue
				}
				if err := c.Commit(t.Context()); err != nil {
					t.Fatalf("Commit: %v", err)
				}
			}
			if dead := h.DeadLettered(t, spec); !slices.Equal(dead, []string{"1", "2", "3"}) {
				t.Fatalf("after Commit the dead letter holds %v, want [1 2 3]", dead)
			}
		})
	}
}

// TestDeadLetterThatLeavesRowsClaimable: a dead_letter statement that
// does not take the rows it buries out of the claim's reach (it marks
// them, but the claim does not skip the mark) would have the claim
// return them forever. The claim fails, naming the dead_letter
// statement, and leaves the queue as it was: nothing is dead-lettered
// that no claim reported.
func TestDeadLetterThatLeavesRowsClaimable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	spec := backlogQueue(t, h, true)
	table := drivertest.TableOf(spec)
	if _, err := h.db.ExecContext(t.Context(), `ALTER TABLE `+table+` ADD COLUMN reason TEXT`); err != nil {
		t.Fatal(err)
	}
	// The claim hands rows back to pending as it buries them: a user's
	// mistake the claim cannot tell from a fresh row.
	spec.Options["dead_letter"] = `UPDATE ` + table + ` SET reason = 'dead', status = 'pending' WHERE id IN ({{ keys | join(', ') }})`
	before := queueState(t, h, spec)
	cur, err := h.drv.Open(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	_, err = cur.Claim(t.Context(), 1)
	if err == nil || !strings.Contains(err.Error(), "dead_letter") {
		t.Fatalf("Claim: err = %v, want an error naming the dead_letter statement", err)
	}
	if after := queueState(t, h, spec); !slices.Equal(after, before) {
		t.Fatalf("after the failed claim the queue is %v, want it as before %v", after, before)
	}
	var marked int
	if err := h.db.QueryRowContext(t.Context(), `SELECT count(*) FROM `+table+` WHERE reason IS NOT NULL`).Scan(&marked); err != nil {
		t.Fatal(err)
	}
	if marked != 0 {
		t.Fatalf("%d rows marked by the dead_letter statement of a claim that failed", marked)
	}
}

// TestBacklogLongerThanOneClaimBuries: a backlog past max_attempts that
// takes more claim rounds than one claim runs is set aside over several
// claims: the first stops at the round limit holding what it buried,
// uncommitted, and says the source may hold more (Claim.More), so that
// the engine does not take the slot as drained.
func TestBacklogLongerThanOneClaimBuries(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	spec, _ := h.NewQueue(t, 120, cursortest.QueueOptions{MaxAttempts: 2})
	if _, err := h.db.ExecContext(t.Context(), `UPDATE `+drivertest.TableOf(spec)+` SET attempts = 5`); err != nil {
		t.Fatal(err)
	}
	before := queueState(t, h, spec)
	cur, err := h.drv.Open(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	// One row per round: the first claim stops at the round limit with
	// 100 rows set aside and says the source may hold more.
	c, err := cur.Claim(t.Context(), 1)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if len(c.Rows) != 0 || len(c.Dead) != 100 || !c.More {
		t.Fatalf("Claim(1) returned %d rows, %d dead, More %v; want 0, 100, true", len(c.Rows), len(c.Dead), c.More)
	}
	if after := queueState(t, h, spec); !slices.Equal(after, before) {
		t.Fatalf("before the claim's commit %d rows changed, want none", countChanged(before, after))
	}
	if err := c.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if dead := h.DeadLettered(t, spec); len(dead) != 100 {
		t.Fatalf("%d rows in the dead letter after the first commit, want 100", len(dead))
	}
	// The next claim buries the rest and finds the source drained.
	c, err = cur.Claim(t.Context(), 1)
	if err != nil {
		t.Fatalf("second Claim: %v", err)
	}
	if len(c.Rows) != 0 || len(c.Dead) != 20 || c.More {
		t.Fatalf("second Claim(1) returned %d rows, %d dead, More %v; want 0, 20, false", len(c.Rows), len(c.Dead), c.More)
	}
	if err := c.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if dead := h.DeadLettered(t, spec); len(dead) != 120 {
		t.Fatalf("%d rows in the dead letter, want 120", len(dead))
	}
}

func countChanged(a, b []string) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n + max(len(a), len(b)) - min(len(a), len(b))
}
