package cursortest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
)

// Sizes and timings of the suite.
const (
	// ConcurrentClaimers is the number of cursors draining one queue at
	// once in the no-double-claim case.
	ConcurrentClaimers = 16
	// ConcurrentRows is the size of that queue.
	ConcurrentRows = 2000
	// PoisonClaimers is the number of cursors releasing the rows of one
	// queue at once in the contended-poison case.
	PoisonClaimers = 4
	// ShortLease is the lease of queues whose rows must come back during
	// the test.
	ShortLease = 1500 * time.Millisecond
	// caseTimeout bounds every case.
	caseTimeout = 90 * time.Second
	// pollInterval paces polling claims while waiting for a lease to end.
	pollInterval = 50 * time.Millisecond
)

// QueueOptions shape a queue made by Harness.NewQueue.
type QueueOptions struct {
	// Lease is how long a claimed row that is neither completed, acked nor
	// released stays with its claimer before a later claim gets it again
	// (SQL: a reclaim clause in the claim; other sources: their own lease).
	// Zero lets the harness choose one longer than any case (a minute).
	Lease time.Duration
	// MaxAttempts is how many deliveries a row gets before it goes to the
	// dead letter instead (Spec.MaxAttempts, plus a dead_letter statement
	// for SQL). Zero means no limit.
	MaxAttempts int
	// EchoTemplateVars asks the claim to also return __worker_slot_id as a
	// column or field "slot", __worker_slot_index as "slot_index" and
	// __frame_max_rows as "frame_max". Only asked of drivers with
	// Features.ClaimTemplate.
	EchoTemplateVars bool
}

// Harness adapts the suite to one driver and its source. Its methods are
// called from parallel subtests, so they must be safe for concurrent use;
// they report failures through the t they are given.
type Harness interface {
	// Driver returns the driver under test; the harness closes it.
	Driver() cursor.Driver
	// NewQueue creates a fresh queue, isolated from every other queue,
	// holding n rows, and returns the Spec to open cursors on it and the
	// rows' keys in source order. The suite sets Spec.LoopID and
	// Spec.SlotID itself.
	NewQueue(t *testing.T, n int, opts QueueOptions) (cursor.Spec, []string)
	// Complete marks rows done the way a playbook body would (SQL: an
	// UPDATE to a final status). Sources that are completed by Ack do
	// nothing here: the suite calls Ack after Complete, as the engine does.
	// It is called from many goroutines at once, hence the error result.
	Complete(ctx context.Context, spec cursor.Spec, rows []cursor.Row) error
	// DeadLettered returns the keys in the queue's dead letter.
	DeadLettered(t *testing.T, spec cursor.Spec) []string
	// DropConnections makes the server drop every connection the driver
	// holds to spec's queue, and returns once they are gone. Other queues
	// should keep theirs (the cases run in parallel), which a harness can
	// arrange by giving each queue its own credential. A source without
	// server connections (an embedded database) calls t.Skip with the
	// reason.
	DropConnections(t *testing.T, spec cursor.Spec)
	// ClaimAndDie claims up to max rows of spec's queue in a claimer that
	// then dies the way a killed process does, between its claim and the
	// engine's record of it: it never calls Commit, Abort, Ack or Release,
	// and its connections are gone. It returns the keys it claimed.
	// ClaimAndDropConnections does this for sources with server
	// connections, ClaimAndAbandon for in-process sources whose rows are
	// held by a lease; an embedded database needs a process of its own to
	// kill.
	ClaimAndDie(t *testing.T, spec cursor.Spec, max int) []string
}

// ClaimAndDropConnections implements Harness.ClaimAndDie for a source
// with server connections: it opens a cursor on spec (slot 0), claims up
// to max rows and leaves the claim pending while the server drops the
// driver's connections (Harness.DropConnections).
func ClaimAndDropConnections(t *testing.T, h Harness, spec cursor.Spec, max int) []string {
	t.Helper()
	keys := ClaimAndAbandon(t, h, spec, max)
	h.DropConnections(t, spec)
	return keys
}

// ClaimAndAbandon implements Harness.ClaimAndDie for an in-process source
// whose claims are held by a lease (there is no connection to lose): it
// claims up to max rows and drops the cursor without settling the claim.
func ClaimAndAbandon(t *testing.T, h Harness, spec cursor.Spec, max int) []string {
	t.Helper()
	ctx := caseContext(t)
	cur := open(t, ctx, h, spec, 0)
	c := pendingClaim(t, ctx, cur, max, h.Driver().Features())
	return keysOf(c.Rows)
}

// KnownGaps is implemented by a harness whose driver is known to fail
// some cases of the suite (see WithKnownGaps).
type KnownGaps interface {
	// KnownGap says why the driver fails the case name, or "" when it is
	// not known to.
	KnownGap(name string) string
}

// WithKnownGaps returns h with the cases named in gaps (case name → why
// the driver fails it) skipped as known gaps, saying why: a driver's
// suite stays green for a gap on record, and the fix removes the entry.
func WithKnownGaps(h Harness, gaps map[string]string) Harness { return gapHarness{h, gaps} }

type gapHarness struct {
	Harness
	gaps map[string]string
}

func (g gapHarness) KnownGap(name string) string { return g.gaps[name] }

// Run runs the conformance suite against h's driver, each case as a
// parallel subtest on its own queue.
func Run(t *testing.T, h Harness) {
	t.Helper()
	feat := h.Driver().Features()
	cases := []struct {
		name string
		fn   func(*testing.T, Harness, cursor.Features)
	}{
		{"BatchClaim", testBatchClaim},
		{"NoDoubleClaim", testNoDoubleClaim},
		{"Drain", testDrain},
		{"RedeliveryAfterCrash", testRedelivery},
		{"DiesBetweenClaimAndRecord", testDiesBeforeRecord},
		{"ExclusiveClaim", testExclusiveClaim},
		{"AbortGivesRowsBack", testAbort},
		{"CommitKeepsRowsClaimed", testCommit},
		{"PoisonToDeadLetter", testPoison},
		{"ContendedPoison", testContendedPoison},
		{"DeadReportedAfterAbort", testDeadAfterAbort(false)},
		{"DeadReportedAfterAbortDrained", testDeadAfterAbort(true)},
		{"DeadLetterOnRequest", testDeadLetterOnRequest},
		{"Reconnect", testReconnect},
		{"ClaimTemplate", testClaimTemplate},
		{"StaleLease", testStaleLease},
		{"Closed", testClosed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if g, ok := h.(KnownGaps); ok {
				if why := g.KnownGap(c.name); why != "" {
					t.Skip("known gap: " + why)
				}
			}
			t.Parallel()
			c.fn(t, h, feat)
		})
	}
}

func caseContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), caseTimeout)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, ctx context.Context, h Harness, spec cursor.Spec, slot int) cursor.Cursor {
	t.Helper()
	spec.SlotID = slot
	if spec.LoopID == "" {
		spec.LoopID = "cursortest-" + t.Name()
	}
	cur, err := h.Driver().Open(ctx, spec)
	if err != nil {
		t.Fatalf("Open(slot %d): %v", slot, err)
	}
	t.Cleanup(func() { _ = cur.Close() })
	return cur
}

// pendingClaim claims and checks the rows' shape: at most max rows (one
// without BatchClaim), non-empty distinct keys, values present, attempt
// >= 1. The claim is left pending.
func pendingClaim(t *testing.T, ctx context.Context, cur cursor.Cursor, max int, feat cursor.Features) *cursor.Claim {
	t.Helper()
	c, err := cur.Claim(ctx, max)
	if err != nil {
		t.Fatalf("Claim(%d): %v", max, err)
	}
	if c == nil {
		t.Fatalf("Claim(%d) returned a nil claim and no error", max)
	}
	rows := c.Rows
	limit := max
	if !feat.BatchClaim {
		limit = 1
	}
	if len(rows) > limit {
		t.Fatalf("Claim(%d) returned %d rows, want at most %d", max, len(rows), limit)
	}
	seen := make(map[string]bool, len(rows))
	for _, r := range rows {
		if r.Key == "" {
			t.Fatalf("Claim(%d) returned a row with an empty key: %+v", max, r)
		}
		if seen[r.Key] {
			t.Fatalf("Claim(%d) returned key %q twice in one frame", max, r.Key)
		}
		seen[r.Key] = true
		if r.Values == nil {
			t.Fatalf("row %q has nil Values", r.Key)
		}
		if r.Lease.Attempt < 1 {
			t.Fatalf("row %q has Lease.Attempt %d, want >= 1", r.Key, r.Lease.Attempt)
		}
	}
	return c
}

// claim claims, checks the rows (pendingClaim) and commits the claim, as
// the engine does once the rows are on record.
func claim(t *testing.T, ctx context.Context, cur cursor.Cursor, max int, feat cursor.Features) []cursor.Row {
	t.Helper()
	c := pendingClaim(t, ctx, cur, max, feat)
	if err := c.Commit(ctx); err != nil {
		t.Fatalf("Commit of a claim of %d rows: %v", len(c.Rows), err)
	}
	return c.Rows
}

// finish completes rows as a body would and acks them as the engine does.
func finish(t *testing.T, ctx context.Context, h Harness, spec cursor.Spec, cur cursor.Cursor, rows []cursor.Row) {
	t.Helper()
	if len(rows) == 0 {
		return
	}
	if err := h.Complete(ctx, spec, rows); err != nil {
		t.Fatalf("Complete(%d rows): %v", len(rows), err)
	}
	if err := cur.Ack(ctx, rows); err != nil {
		t.Fatalf("Ack(%d rows): %v", len(rows), err)
	}
}

// drain claims, completes and acks until a claim returns zero rows, and
// returns the keys in claim order.
func drain(t *testing.T, ctx context.Context, h Harness, spec cursor.Spec, cur cursor.Cursor, max int, feat cursor.Features) []string {
	t.Helper()
	var keys []string
	for {
		rows := claim(t, ctx, cur, max, feat)
		if len(rows) == 0 {
			return keys
		}
		for _, r := range rows {
			keys = append(keys, r.Key)
		}
		finish(t, ctx, h, spec, cur, rows)
	}
}

func keysOf(rows []cursor.Row) []string {
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	return keys
}

// sameSet fails unless got holds exactly the keys of want, each once.
func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	count := make(map[string]int, len(got))
	var dups []string
	for _, k := range got {
		count[k]++
		if count[k] == 2 {
			dups = append(dups, k)
		}
	}
	if len(dups) > 0 {
		t.Fatalf("%s: %d keys claimed more than once, e.g. %v", what, len(dups), dups[:min(len(dups), 10)])
	}
	var missing, extra []string
	wantSet := make(map[string]bool, len(want))
	for _, k := range want {
		wantSet[k] = true
		if count[k] == 0 {
			missing = append(missing, k)
		}
	}
	for _, k := range got {
		if !wantSet[k] {
			extra = append(extra, k)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("%s: %d keys missing (e.g. %v), %d unexpected (e.g. %v)", what,
			len(missing), missing[:min(len(missing), 10)], len(extra), extra[:min(len(extra), 10)])
	}
}

// waitClaimers waits for the claimer goroutines of wg and stops the test
// with the errors they sent to errs, if any.
func waitClaimers(t *testing.T, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// wait sleeps one poll interval or until ctx ends.
func wait(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s: %v", what, ctx.Err())
	case <-time.After(pollInterval):
	}
}

func testBatchClaim(t *testing.T, h Harness, feat cursor.Features) {
	const n = 20
	ctx := caseContext(t)
	spec, keys := h.NewQueue(t, n, QueueOptions{})
	cur := open(t, ctx, h, spec, 0)
	var claimed []string
	if feat.BatchClaim {
		for _, step := range []struct{ max, want int }{{1, 1}, {7, 7}, {n + 5, n - 8}} {
			rows := claim(t, ctx, cur, step.max, feat)
			if len(rows) != step.want {
				t.Fatalf("Claim(%d) after %d claimed rows returned %d rows, want %d", step.max, len(claimed), len(rows), step.want)
			}
			claimed = append(claimed, keysOf(rows)...)
			finish(t, ctx, h, spec, cur, rows)
		}
	} else {
		for len(claimed) < n {
			rows := claim(t, ctx, cur, 7, feat)
			if len(rows) != 1 {
				t.Fatalf("Claim(7) after %d of %d rows returned %d rows, want 1", len(claimed), n, len(rows))
			}
			claimed = append(claimed, keysOf(rows)...)
			finish(t, ctx, h, spec, cur, rows)
		}
	}
	if rows := claim(t, ctx, cur, n, feat); len(rows) != 0 {
		t.Fatalf("Claim after draining returned %d rows (%v), want 0", len(rows), keysOf(rows))
	}
	sameSet(t, "batch claims", claimed, keys)
	if feat.Ordered && !slices.Equal(claimed, keys) {
		t.Fatalf("Features.Ordered, but rows were claimed in order %v, want %v", claimed, keys)
	}
}

func testNoDoubleClaim(t *testing.T, h Harness, feat cursor.Features) {
	ctx := caseContext(t)
	spec, keys := h.NewQueue(t, ConcurrentRows, QueueOptions{})
	max := 25
	if !feat.BatchClaim {
		max = 1
	}
	curs := make([]cursor.Cursor, ConcurrentClaimers)
	for i := range curs {
		curs[i] = open(t, ctx, h, spec, i)
	}
	var (
		mu      sync.Mutex
		claimed []string
		wg      sync.WaitGroup
		errs    = make(chan error, ConcurrentClaimers)
	)
	for i, cur := range curs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := cur.Claim(ctx, max)
				if err != nil {
					errs <- fmt.Errorf("claimer %d: Claim: %w", i, err)
					return
				}
				if err := c.Commit(ctx); err != nil {
					errs <- fmt.Errorf("claimer %d: Commit: %w", i, err)
					return
				}
				rows := c.Rows
				if len(rows) == 0 {
					return
				}
				if len(rows) > max {
					errs <- fmt.Errorf("claimer %d: Claim(%d) returned %d rows", i, max, len(rows))
					return
				}
				mu.Lock()
				claimed = append(claimed, keysOf(rows)...)
				mu.Unlock()
				if err := h.Complete(ctx, spec, rows); err != nil {
					errs <- fmt.Errorf("claimer %d: Complete: %w", i, err)
					return
				}
				if err := cur.Ack(ctx, rows); err != nil {
					errs <- fmt.Errorf("claimer %d: Ack: %w", i, err)
					return
				}
			}
		}()
	}
	waitClaimers(t, &wg, errs)
	sameSet(t, fmt.Sprintf("%d concurrent claimers", ConcurrentClaimers), claimed, keys)
	if rows := claim(t, ctx, curs[0], max, feat); len(rows) != 0 {
		t.Fatalf("Claim after draining returned %d rows, want 0", len(rows))
	}
}

func testDrain(t *testing.T, h Harness, feat cursor.Features) {
	ctx := caseContext(t)
	empty, _ := h.NewQueue(t, 0, QueueOptions{})
	cur := open(t, ctx, h, empty, 0)
	for i := range 2 {
		if rows := claim(t, ctx, cur, 5, feat); len(rows) != 0 {
			t.Fatalf("Claim %d on an empty queue returned %d rows, want 0", i+1, len(rows))
		}
	}
	spec, keys := h.NewQueue(t, 3, QueueOptions{})
	cur = open(t, ctx, h, spec, 0)
	sameSet(t, "drain", drain(t, ctx, h, spec, cur, 2, feat), keys)
	other := open(t, ctx, h, spec, 1)
	for i, c := range []cursor.Cursor{cur, other, cur} {
		if rows := claim(t, ctx, c, 5, feat); len(rows) != 0 {
			t.Fatalf("Claim %d after draining returned %d rows (%v), want 0", i+1, len(rows), keysOf(rows))
		}
	}
}

func testRedelivery(t *testing.T, h Harness, feat cursor.Features) {
	const n = 3
	ctx := caseContext(t)
	spec, keys := h.NewQueue(t, n, QueueOptions{Lease: ShortLease})
	start := time.Now()
	dying := open(t, ctx, h, spec, 0)
	first := make(map[string]int)
	for len(first) < n {
		rows := claim(t, ctx, dying, n, feat)
		if len(rows) == 0 {
			t.Fatalf("Claim returned 0 rows after %d of %d", len(first), n)
		}
		for _, r := range rows {
			first[r.Key] = r.Lease.Attempt
		}
	}
	// The claimer dies: no Complete, no Ack, no Release.
	if err := dying.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	survivor := open(t, ctx, h, spec, 1)
	// Rows that come back are checked against the time the first claim
	// began: a slow source may legitimately reach the end of the lease
	// before the survivor's first claim, but never earlier.
	var again []cursor.Row
	for len(again) < n {
		rows := claim(t, ctx, survivor, n, feat)
		if len(rows) == 0 {
			wait(t, ctx, "the dead claimer's rows to come back")
			continue
		}
		if elapsed := time.Since(start); elapsed < ShortLease-200*time.Millisecond {
			t.Fatalf("rows %v were claimed again after %v, before their %v lease ended", keysOf(rows), elapsed, ShortLease)
		}
		again = append(again, rows...)
		finish(t, ctx, h, spec, survivor, rows)
	}
	sameSet(t, "redelivered", keysOf(again), keys)
	for _, r := range again {
		want := 1
		if feat.Attempts {
			want = first[r.Key] + 1
		}
		if r.Lease.Attempt != want {
			t.Errorf("redelivered row %q has Lease.Attempt %d, want %d (first delivery: %d, Features.Attempts %v)",
				r.Key, r.Lease.Attempt, want, first[r.Key], feat.Attempts)
		}
	}
	if rows := claim(t, ctx, survivor, n, feat); len(rows) != 0 {
		t.Fatalf("Claim after completing the redelivered rows returned %v, want none", keysOf(rows))
	}
}

func testPoison(t *testing.T, h Harness, feat cursor.Features) {
	if !feat.DeadLetter {
		t.Skip("Features.DeadLetter is false: the driver has no dead letter")
	}
	const n, maxAttempts = 3, 2
	ctx := caseContext(t)
	spec, keys := h.NewQueue(t, n, QueueOptions{Lease: ShortLease, MaxAttempts: maxAttempts})
	cur := open(t, ctx, h, spec, 0)
	deliveries := make(map[string][]int)
	for {
		rows := claim(t, ctx, cur, n, feat)
		for _, r := range rows {
			if !slices.Contains(keys, r.Key) {
				t.Fatalf("claimed unknown key %q", r.Key)
			}
			if feat.Attempts && r.Lease.Attempt > maxAttempts {
				t.Fatalf("row %q delivered with attempt %d, past MaxAttempts %d", r.Key, r.Lease.Attempt, maxAttempts)
			}
			deliveries[r.Key] = append(deliveries[r.Key], r.Lease.Attempt)
		}
		if len(rows) > 0 {
			// The body failed: hand the rows back (or let the lease lapse
			// where Release is a no-op).
			if err := cur.Release(ctx, rows); err != nil {
				t.Fatalf("Release: %v", err)
			}
			continue
		}
		dead := h.DeadLettered(t, spec)
		if len(dead) == n {
			sameSet(t, "dead letter", dead, keys)
			break
		}
		wait(t, ctx, fmt.Sprintf("all %d rows in the dead letter (have %v)", n, dead))
	}
	for _, k := range keys {
		d := deliveries[k]
		if len(d) == 0 || len(d) > maxAttempts {
			t.Errorf("row %q delivered %d times, want 1..%d", k, len(d), maxAttempts)
		}
		if feat.Attempts && !slices.Equal(d, []int{1, 2}) {
			t.Errorf("row %q delivered with attempts %v, want [1 2]", k, d)
		}
	}
	if rows := claim(t, ctx, cur, n, feat); len(rows) != 0 {
		t.Fatalf("dead-lettered rows %v were claimed again", keysOf(rows))
	}
}

// testContendedPoison: claimers that release every row they get, all at
// once, as the slots of a loop whose body always fails do. However the
// claims and releases interleave, no row is delivered more than
// MaxAttempts times, every row ends in the dead letter, and no claim
// lists a row dead that another claim listed already.
func testContendedPoison(t *testing.T, h Harness, feat cursor.Features) {
	if !feat.DeadLetter {
		t.Skip("Features.DeadLetter is false: the driver has no dead letter")
	}
	const n, maxAttempts, max = 8, 3, 2
	ctx := caseContext(t)
	spec, keys := h.NewQueue(t, n, QueueOptions{Lease: ShortLease, MaxAttempts: maxAttempts})
	var (
		mu         sync.Mutex
		deliveries = make(map[string][]int)
		reported   = make(map[string]int) // Claim.Dead listings
		wg         sync.WaitGroup
		errs       = make(chan error, PoisonClaimers)
		done       = make(chan struct{})
	)
	for i := range PoisonClaimers {
		cur := open(t, ctx, h, spec, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := cur.Claim(ctx, max)
				if err == nil {
					err = c.Commit(ctx)
				}
				if err != nil {
					errs <- fmt.Errorf("claimer %d: %w", i, err)
					return
				}
				mu.Lock()
				for _, r := range c.Dead {
					reported[r.Key]++
				}
				for _, r := range c.Rows {
					deliveries[r.Key] = append(deliveries[r.Key], r.Lease.Attempt)
				}
				mu.Unlock()
				if len(c.Rows) > 0 {
					if err := cur.Release(ctx, c.Rows); err != nil {
						errs <- fmt.Errorf("claimer %d: Release: %w", i, err)
						return
					}
					continue
				}
				select {
				case <-ctx.Done():
					return
				case <-done:
					return
				case <-time.After(pollInterval):
				}
			}
		}()
	}
	for len(h.DeadLettered(t, spec)) < n && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(pollInterval):
		}
	}
	close(done)
	waitClaimers(t, &wg, errs)
	sameSet(t, "dead letter", h.DeadLettered(t, spec), keys)
	for _, k := range keys {
		d := deliveries[k]
		if len(d) == 0 || len(d) > maxAttempts {
			t.Errorf("row %q delivered %d times (attempts %v), want 1..%d", k, len(d), d, maxAttempts)
		}
		// A row's deliveries never overlap (each follows the release of
		// the one before), so they are recorded in order.
		if feat.Attempts && !slices.Equal(d, []int{1, 2, 3}) {
			t.Errorf("row %q delivered with attempts %v, want [1 2 3]", k, d)
		}
		if reported[k] > 1 {
			t.Errorf("row %q listed dead by %d claims, want at most one", k, reported[k])
		}
	}
}

// testDeadAfterAbort: a claim that lists a row dead and is then aborted
// (the engine could not record it: the claimer died, or a re-issue
// superseded its attempt) must not leave the row in the dead letter
// unreported: a later claim lists it dead again, so that every row in the
// dead letter was listed by a committed claim at least once. A source
// moves the rows to its dead letter in Commit, as a transactional one
// commits its dead_letter statement with the claim. With drained, the
// aborted claim finds nothing but dead rows (no rows to run); otherwise
// it also returns rows.
func testDeadAfterAbort(drained bool) func(*testing.T, Harness, cursor.Features) {
	return func(t *testing.T, h Harness, feat cursor.Features) {
		if !feat.DeadLetter {
			t.Skip("Features.DeadLetter is false: the driver has no dead letter")
		}
		n := 3
		if drained {
			n = 2
		}
		ctx := caseContext(t)
		spec, keys := h.NewQueue(t, n, QueueOptions{Lease: ShortLease, MaxAttempts: 1})
		cur := open(t, ctx, h, spec, 0)
		// reported counts, by row, the committed claims that listed it dead.
		reported := map[string]int{}
		commit := func(c *cursor.Claim) {
			t.Helper()
			for _, k := range keysOf(c.Dead) {
				reported[k]++
			}
			if err := c.Commit(ctx); err != nil {
				t.Fatalf("Commit of a claim listing %v dead: %v", keysOf(c.Dead), err)
			}
		}
		// Deliver one row (drained: every row) once and hand it back: it
		// is past MaxAttempts.
		delivered := map[string]bool{}
		for len(delivered) == 0 || drained && len(delivered) < n {
			c := pendingClaim(t, ctx, cur, 1, feat)
			commit(c)
			rows := c.Rows
			for _, r := range rows {
				delivered[r.Key] = true
			}
			if len(rows) == 0 {
				wait(t, ctx, fmt.Sprintf("rows delivered once (have %v)", delivered))
				continue
			}
			if err := cur.Release(ctx, rows); err != nil {
				t.Fatalf("Release: %v", err)
			}
		}
		// The claim that meets them lists them dead; its record fails.
		var aborted []string
		for len(aborted) == 0 {
			c := pendingClaim(t, ctx, cur, n, feat)
			aborted = keysOf(c.Dead)
			if drained && len(c.Rows) > 0 {
				t.Fatalf("Claim returned rows %v past MaxAttempts 1", keysOf(c.Rows))
			}
			if err := c.Abort(ctx); err != nil {
				t.Fatalf("Abort of a claim listing %v dead: %v", aborted, err)
			}
			if len(aborted) > 0 {
				break
			}
			if dead := h.DeadLettered(t, spec); len(dead) > 0 {
				t.Fatalf("rows %v are in the dead letter, but no claim listed any dead", dead)
			}
			if len(c.Rows) == 0 {
				wait(t, ctx, "a claim listing the rows dead")
			}
		}
		// Every row, delivered and handed back, ends in the dead letter.
		for {
			c := pendingClaim(t, ctx, cur, n, feat)
			commit(c)
			if len(c.Rows) > 0 {
				if err := cur.Release(ctx, c.Rows); err != nil {
					t.Fatalf("Release: %v", err)
				}
				continue
			}
			dead := h.DeadLettered(t, spec)
			if len(dead) == n {
				sameSet(t, "dead letter", dead, keys)
				break
			}
			wait(t, ctx, fmt.Sprintf("all %d rows in the dead letter (have %v; the aborted claim listed %v)", n, dead, aborted))
		}
		for _, k := range keys {
			if reported[k] == 0 {
				t.Errorf("row %q is in the dead letter, but no committed claim listed it dead (the aborted claim listed %v)", k, aborted)
			}
		}
	}
}

func testDeadLetterOnRequest(t *testing.T, h Harness, feat cursor.Features) {
	if !feat.DeadLetter {
		t.Skip("Features.DeadLetter is false: the driver has no dead letter")
	}
	ctx := caseContext(t)
	spec, keys := h.NewQueue(t, 2, QueueOptions{MaxAttempts: 5})
	cur := open(t, ctx, h, spec, 0)
	dl, ok := cur.(cursor.DeadLetterer)
	if !ok {
		t.Skipf("%T does not implement cursor.DeadLetterer", cur)
	}
	rows := claim(t, ctx, cur, 1, feat)
	if len(rows) != 1 {
		t.Fatalf("Claim(1) returned %d rows, want 1", len(rows))
	}
	if err := dl.DeadLetter(ctx, rows, "cursortest: the engine gave up"); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	sameSet(t, "dead letter", h.DeadLettered(t, spec), keysOf(rows))
	rest := drain(t, ctx, h, spec, cur, 5, feat)
	want := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == rows[0].Key })
	sameSet(t, "rows left after dead-lettering one", rest, want)
}

func testReconnect(t *testing.T, h Harness, feat cursor.Features) {
	const n = 10
	ctx := caseContext(t)
	spec, keys := h.NewQueue(t, n, QueueOptions{})
	cur := open(t, ctx, h, spec, 0)
	rows := claim(t, ctx, cur, 2, feat)
	if len(rows) == 0 {
		t.Fatal("Claim before the drop returned 0 rows")
	}
	claimed := keysOf(rows)
	finish(t, ctx, h, spec, cur, rows)
	h.DropConnections(t, spec)
	// The first claim after the drop must succeed: the driver reconnects
	// (retrying once inside if it must) rather than failing the frame.
	c, err := cur.Claim(ctx, 2)
	if err != nil {
		t.Fatalf("Claim after the server dropped the connections: %v", err)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatalf("Commit after the server dropped the connections: %v", err)
	}
	rows = c.Rows
	if len(rows) == 0 {
		t.Fatal("Claim after the drop returned 0 rows from a queue that is not drained")
	}
	claimed = append(claimed, keysOf(rows)...)
	finish(t, ctx, h, spec, cur, rows)
	claimed = append(claimed, drain(t, ctx, h, spec, cur, 3, feat)...)
	sameSet(t, "claims across a reconnect", claimed, keys)
}

func testClaimTemplate(t *testing.T, h Harness, feat cursor.Features) {
	if !feat.ClaimTemplate {
		t.Skip("Features.ClaimTemplate is false: the driver's claim is not a template")
	}
	const slot, max = 3, 2
	// A snowflake past 2^52: it must reach the claim exactly.
	const slotID int64 = 1<<52 + 12345
	ctx := caseContext(t)
	spec, _ := h.NewQueue(t, 5, QueueOptions{EchoTemplateVars: true})
	spec.WorkerSlotID = slotID
	cur := open(t, ctx, h, spec, slot)
	rows := claim(t, ctx, cur, max, feat)
	want := max
	if !feat.BatchClaim {
		want = 1
	}
	if len(rows) != want {
		t.Fatalf("Claim(%d) returned %d rows, want %d (is __frame_max_rows rendered?)", max, len(rows), want)
	}
	for _, r := range rows {
		if got := fmt.Sprint(r.Values["slot"]); got != strconv.FormatInt(slotID, 10) {
			t.Errorf("row %q: slot = %q, want %d (__worker_slot_id)", r.Key, got, slotID)
		}
		if got := fmt.Sprint(r.Values["slot_index"]); got != strconv.Itoa(slot) {
			t.Errorf("row %q: slot_index = %q, want %d (__worker_slot_index)", r.Key, got, slot)
		}
		if got := fmt.Sprint(r.Values["frame_max"]); got != strconv.Itoa(max) {
			t.Errorf("row %q: frame_max = %q, want %d (__frame_max_rows)", r.Key, got, max)
		}
	}
}

func testStaleLease(t *testing.T, h Harness, feat cursor.Features) {
	if !feat.Fencing {
		t.Skip("Features.Fencing is false: the driver does not fence stale lease tokens")
	}
	ctx := caseContext(t)
	spec, keys := h.NewQueue(t, 1, QueueOptions{Lease: ShortLease})
	slow := open(t, ctx, h, spec, 0)
	old := claim(t, ctx, slow, 1, feat)
	if len(old) != 1 {
		t.Fatalf("Claim(1) returned %d rows, want 1", len(old))
	}
	fast := open(t, ctx, h, spec, 1)
	var fresh []cursor.Row
	for len(fresh) == 0 {
		fresh = claim(t, ctx, fast, 1, feat)
		if len(fresh) == 0 {
			wait(t, ctx, "the lease to lapse and the row to be re-issued")
		}
	}
	sameSet(t, "re-issued row", keysOf(fresh), keys)
	if fresh[0].Lease.Token == old[0].Lease.Token {
		t.Fatalf("re-issued row kept token %q", old[0].Lease.Token)
	}
	if err := slow.Ack(ctx, old); !errors.Is(err, cursor.ErrStaleLease) {
		t.Fatalf("Ack with the stale token: err = %v, want ErrStaleLease", err)
	}
	if err := slow.Release(ctx, old); !errors.Is(err, cursor.ErrStaleLease) {
		t.Fatalf("Release with the stale token: err = %v, want ErrStaleLease", err)
	}
	finish(t, ctx, h, spec, fast, fresh)
	if rows := claim(t, ctx, fast, 1, feat); len(rows) != 0 {
		t.Fatalf("Claim after acking the re-issued row returned %v, want none", keysOf(rows))
	}
}

func testClosed(t *testing.T, h Harness, feat cursor.Features) {
	ctx := caseContext(t)
	spec, _ := h.NewQueue(t, 1, QueueOptions{})
	cur := open(t, ctx, h, spec, 0)
	if err := cur.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	c, err := cur.Claim(ctx, 1)
	if !errors.Is(err, cursor.ErrClosed) {
		t.Fatalf("Claim after Close: claim %v, err = %v, want ErrClosed", c, err)
	}
	// The queue is untouched: another cursor still gets the row.
	other := open(t, ctx, h, spec, 1)
	if rows := claim(t, ctx, other, 1, feat); len(rows) != 1 {
		t.Fatalf("Claim on a fresh cursor returned %d rows, want 1", len(rows))
	}
}

func testDiesBeforeRecord(t *testing.T, h Harness, feat cursor.Features) {
	const n = 5
	ctx := caseContext(t)
	// A transactional source gets no lease at all (no reclaim clause):
	// the rows can only come back because the dead claimer's transaction
	// was rolled back.
	opts := QueueOptions{}
	if !feat.TransactionalClaim {
		opts.Lease = ShortLease
	}
	spec, keys := h.NewQueue(t, n, opts)
	start := time.Now()
	died := h.ClaimAndDie(t, spec, n)
	if len(died) == 0 {
		t.Fatal("the dying claimer claimed no rows")
	}
	survivor := open(t, ctx, h, spec, 1)
	var again []string
	for len(again) < n {
		rows := claim(t, ctx, survivor, n, feat)
		if len(rows) == 0 {
			wait(t, ctx, fmt.Sprintf("the rows %v of the claimer that died before its claim was recorded", died))
			continue
		}
		if !feat.TransactionalClaim {
			if elapsed := time.Since(start); elapsed < ShortLease-200*time.Millisecond {
				t.Fatalf("rows %v were claimed again after %v, before their %v lease ended", keysOf(rows), elapsed, ShortLease)
			}
		}
		again = append(again, keysOf(rows)...)
		finish(t, ctx, h, spec, survivor, rows)
	}
	sameSet(t, "rows claimed after the claimer died", again, keys)
	if rows := claim(t, ctx, survivor, n, feat); len(rows) != 0 {
		t.Fatalf("Claim after completing every row returned %v, want none", keysOf(rows))
	}
}

// testExclusiveClaim checks Features.ExclusiveClaim: while a claim of
// every row is open, another cursor's claim must not come back empty (nor
// with rows): it waits or fails. Once the open claim is aborted, the
// other cursor gets the rows.
func testExclusiveClaim(t *testing.T, h Harness, feat cursor.Features) {
	if !feat.ExclusiveClaim {
		t.Skip("the driver's claims are not exclusive (Features.ExclusiveClaim)")
	}
	const n = 3
	ctx := caseContext(t)
	spec, keys := h.NewQueue(t, n, QueueOptions{})
	first := open(t, ctx, h, spec, 0)
	held := pendingClaim(t, ctx, first, n, feat)
	if len(held.Rows) != n {
		t.Fatalf("Claim(%d) returned %d rows, want all %d", n, len(held.Rows), n)
	}
	other := open(t, ctx, h, spec, 1)
	octx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	c, err := other.Claim(octx, n)
	cancel()
	if err == nil {
		_ = c.Abort(ctx)
		t.Fatalf("Claim while another claim of every row is open returned %v and no error; "+
			"want it to wait or fail (Features.ExclusiveClaim)", keysOf(c.Rows))
	}
	if err := held.Abort(ctx); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	rows := claim(t, ctx, other, n, feat)
	sameSet(t, "rows claimed once the open claim was aborted", keysOf(rows), keys)
	finish(t, ctx, h, spec, other, rows)
}

func testAbort(t *testing.T, h Harness, feat cursor.Features) {
	const n = 5
	ctx := caseContext(t)
	// The default lease outlasts the case: only Abort can bring rows back.
	spec, keys := h.NewQueue(t, n, QueueOptions{})
	cur := open(t, ctx, h, spec, 0)
	c := pendingClaim(t, ctx, cur, 3, feat)
	if len(c.Rows) == 0 {
		t.Fatal("Claim(3) returned no rows")
	}
	aborted := keysOf(c.Rows)
	if err := c.Abort(ctx); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if err := c.Commit(ctx); !errors.Is(err, cursor.ErrClaimSettled) {
		t.Fatalf("Commit after Abort: err = %v, want ErrClaimSettled", err)
	}
	other := open(t, ctx, h, spec, 1)
	var got []string
	for {
		rows := claim(t, ctx, other, n, feat)
		got = append(got, keysOf(rows)...)
		finish(t, ctx, h, spec, other, rows)
		if len(rows) > 0 {
			continue
		}
		if len(got) >= n {
			break
		}
		wait(t, ctx, fmt.Sprintf("the aborted rows %v to be claimable again (have %v)", aborted, got))
	}
	sameSet(t, "rows claimed after an abort", got, keys)
}

func testCommit(t *testing.T, h Harness, feat cursor.Features) {
	const n = 5
	ctx := caseContext(t)
	spec, keys := h.NewQueue(t, n, QueueOptions{})
	cur := open(t, ctx, h, spec, 0)
	c := pendingClaim(t, ctx, cur, 3, feat)
	if len(c.Rows) == 0 {
		t.Fatal("Claim(3) returned no rows")
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if err := c.Abort(ctx); err != nil {
		t.Fatalf("Abort after Commit: %v, want nil (a no-op)", err)
	}
	held := keysOf(c.Rows)
	other := open(t, ctx, h, spec, 1)
	rest := drain(t, ctx, h, spec, other, n, feat)
	for _, k := range rest {
		if slices.Contains(held, k) {
			t.Fatalf("row %s was claimed by another cursor while its committed claim holds it", k)
		}
	}
	finish(t, ctx, h, spec, cur, c.Rows)
	sameSet(t, "committed rows and the rest", append(held, rest...), keys)
}

// ClaimCommitted claims up to max rows from cur and commits the claim at
// once, as the engine does once the rows are on record, for tests that
// exercise what happens after a claim.
func ClaimCommitted(ctx context.Context, cur cursor.Cursor, max int) ([]cursor.Row, error) {
	c, err := cur.Claim(ctx, max)
	if err != nil {
		return nil, err
	}
	if err := c.Commit(ctx); err != nil {
		return nil, err
	}
	return c.Rows, nil
}
