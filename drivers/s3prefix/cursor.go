package s3prefix

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/internal/jsonnum"
)

// listPageSize is the page size of listings (S3's maximum).
const listPageSize = 1000

// Cursor claims objects under one pending prefix. It is a cursor.Cursor
// and a cursor.DeadLetterer; safe for concurrent use.
type Cursor struct {
	spec cursor.Spec
	opts Options
	b    *bucket
	// release gives b back to the driver's cache, at Close.
	release func()
	lease   time.Duration
	conc    int
	log     *slog.Logger
	closed  atomic.Bool
}

var (
	_ cursor.Cursor       = (*Cursor)(nil)
	_ cursor.DeadLetterer = (*Cursor)(nil)
)

func (c *Cursor) fail(op string, err error) error {
	return &cursor.ClaimError{Kind: c.spec.Kind, Auth: c.spec.Auth, Op: op, Err: err}
}

// markerRef is one listed marker object.
type markerRef struct {
	key string
	gen int64
	id  string // cache identity: key, modification time and size
}

// candidate is one pending object and its listed markers (ascending).
type candidate struct {
	name    string
	obj     *blob.ListObject
	markers []markerRef
}

// Claim leases up to limit objects (see claim) and returns them as a
// claim held by their lease markers from the start: Commit does nothing
// for them, Abort releases them (counting the delivery), and the objects
// of a claimer that died are claimed again once their markers expire.
//
// Objects past MaxAttempts are leased too, without counting a delivery,
// and listed in the claim's Dead, whether or not it returns rows: Commit
// (once the engine recorded them dead) moves them to the dead prefix,
// Abort hands them back, and a claimer that dies before Commit leaves
// them to the claim after its lease, which lists them dead again. A move
// made in Claim would be lost to the log with a record that never comes.
func (c *Cursor) Claim(ctx context.Context, limit int) (*cursor.Claim, error) {
	rows, dead, err := c.claim(ctx, limit)
	if err != nil {
		// Hand back what the claim leased rather than strand it until the
		// lease lapses.
		if rerr := c.giveBack(context.WithoutCancel(ctx), rows, dead); rerr != nil {
			c.log.Warn("s3prefix: release after a failed claim", "rows", len(rows), "dead", len(dead), "err", rerr)
		}
		return nil, err
	}
	claim := cursor.NewClaim(rows,
		func(ctx context.Context) error { return c.buryHeld(ctx, dead) },
		func(ctx context.Context) error { return c.giveBack(ctx, rows, dead) })
	for _, d := range dead {
		claim.Dead = append(claim.Dead, d.row)
	}
	return claim, nil
}

// exhausted is a row past MaxAttempts that a claim leased to bury (as
// Claim.Dead lists it: no lease of its own to the engine), the token of
// that lease, and why it is dead.
type exhausted struct {
	row    cursor.Row
	token  string
	reason string
}

// giveBack releases rows (counting the delivery) and the exhausted rows
// dead that a claim leased to bury (counting none: they keep their
// reason, see buryLease).
func (c *Cursor) giveBack(ctx context.Context, rows []cursor.Row, dead []exhausted) error {
	var err error
	if len(rows) > 0 {
		err = c.Release(ctx, rows)
	}
	if len(dead) > 0 {
		err = errors.Join(err, c.settleExhausted(ctx, "release", stateReleased, dead))
	}
	return err
}

// buryHeld moves the exhausted rows dead, leased by a claim now on
// record, to the dead prefix (the claim's Commit). A row whose lease
// lapsed and was taken by another claim is refused as stale: that claim
// lists it dead.
func (c *Cursor) buryHeld(ctx context.Context, dead []exhausted) error {
	if len(dead) == 0 {
		return nil
	}
	return c.settleExhausted(ctx, "dead_letter", stateDead, dead)
}

// settleExhausted ends the leases of the exhausted rows dead with a marker
// of state (dead or released) that keeps their reason.
func (c *Cursor) settleExhausted(ctx context.Context, op, state string, dead []exhausted) error {
	rows := make([]cursor.Row, len(dead))
	reasons := make(map[string]string, len(dead))
	for i, d := range dead {
		rows[i] = d.row
		rows[i].Lease.Token = d.token
		reasons[d.row.Key] = d.reason
	}
	return c.transition(ctx, op, rows, func(r cursor.Row) marker {
		return marker{State: state, Attempt: r.Lease.Attempt, Reason: reasons[r.Key]}
	}, c.destOf)
}

// claim leases up to max pending objects. For each candidate it reads the
// latest marker (cached: markers never change) and creates the next
// generation conditionally; losing that race means another claimer has
// the object. Objects whose latest marker is done or dead are moved on
// behalf of a claimer that died half-way; objects past MaxAttempts are
// leased to be buried (see buryLease), and returned as dead. Zero rows
// mean every pending object holds a live lease or there is none. On an
// error, rows and dead are what the claim leased so far.
func (c *Cursor) claim(ctx context.Context, limit int) (rows []cursor.Row, dead []exhausted, err error) {
	if c.closed.Load() {
		return nil, nil, c.fail("claim", cursor.ErrClosed)
	}
	if limit < 1 {
		return nil, nil, c.fail("claim", fmt.Errorf("limit rows %d, want at least 1", limit))
	}
	var (
		markers map[string][]markerRef  // by marker name
		pending = make(map[string]bool) // marker names of pending objects
		tok     = blob.FirstPageToken
		lo      = &blob.ListOptions{Prefix: c.opts.Prefix}
	)
	// Claimers of one loop start at different points of a page (by slot),
	// so a page holds room for the frames of the slots below this one.
	pageSize := min(listPageSize, max(100, limit*(c.spec.SlotID+2)))
	for len(rows) < limit {
		// Markers are listed before each page: an object claimed and
		// finished in between is then absent from the page rather than
		// present without markers (which costs a marker and its removal).
		if markers, err = c.listMarkers(ctx); err != nil {
			return rows, dead, c.fail("claim", err)
		}
		page, next, err := c.b.b.ListPage(ctx, tok, pageSize, lo)
		if err != nil {
			return rows, dead, c.fail("claim", fmt.Errorf("list pending: %w", err))
		}
		cands := make([]candidate, 0, len(page))
		for _, obj := range page {
			name := strings.TrimPrefix(obj.Key, c.opts.Prefix)
			if obj.IsDir || name == "" || strings.HasSuffix(name, "/") {
				continue // "directory" placeholders are not rows
			}
			mname := markerName(c.opts.LeasePrefix, name)
			pending[mname] = true
			cands = append(cands, candidate{name: name, obj: obj, markers: markers[mname]})
		}
		if n := len(cands); n > 0 {
			off := (c.spec.SlotID * limit) % n
			cands = append(cands[off:], cands[:off]...)
		}
		for len(cands) > 0 && len(rows) < limit {
			n := min(limit-len(rows), len(cands))
			won, buried, err := c.tryBatch(ctx, cands[:n])
			rows = append(rows, won...)
			dead = append(dead, buried...)
			if err != nil {
				if len(rows) == 0 {
					return nil, dead, c.fail("claim", err)
				}
				// Hand out what was leased rather than strand it until
				// its lease lapses.
				c.log.Warn("s3prefix: claim cut short", "rows", len(rows), "err", err)
				return rows, dead, nil
			}
			cands = cands[n:]
		}
		if len(next) == 0 {
			if len(rows) < limit {
				c.collectOrphans(ctx, markers, pending)
			}
			break
		}
		tok = next
	}
	slices.SortFunc(rows, func(a, b cursor.Row) int { return strings.Compare(a.Key, b.Key) })
	return rows, dead, nil
}

// listMarkers lists the lease prefix: marker name (see markerName) →
// markers, ascending.
func (c *Cursor) listMarkers(ctx context.Context) (map[string][]markerRef, error) {
	out := make(map[string][]markerRef)
	it := c.b.b.List(&blob.ListOptions{Prefix: c.opts.LeasePrefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list lease markers: %w", err)
		}
		name, gen, ok := parseMarkerKey(c.opts.LeasePrefix, obj.Key)
		if !ok {
			continue
		}
		id := obj.Key + "|" + strconv.FormatInt(obj.ModTime.UnixNano(), 10) + "|" + strconv.FormatInt(obj.Size, 10)
		out[name] = append(out[name], markerRef{key: obj.Key, gen: gen, id: id})
	}
	for _, ms := range out {
		slices.SortFunc(ms, func(a, b markerRef) int { return int(a.gen - b.gen) })
	}
	return out, nil
}

// state reads a marker's body, from the cache when it was read before.
// ok is false when the marker no longer exists.
func (c *Cursor) state(ctx context.Context, m markerRef) (marker, bool, error) {
	if st, ok := c.b.cached(m.id); ok {
		return st, true, nil
	}
	body, err := c.b.b.ReadAll(ctx, m.key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return marker{}, false, nil
	}
	if err != nil {
		return marker{}, false, fmt.Errorf("read lease marker: %w", err)
	}
	st, err := decodeMarker(body)
	if err != nil {
		return marker{}, false, fmt.Errorf("%s: %w", m.key, err)
	}
	c.b.remember(m.id, st)
	return st, true, nil
}

// create writes name's marker of generation gen unless it exists. won is
// false when another writer created it first.
func (c *Cursor) create(ctx context.Context, name string, gen int64, m marker) (won bool, err error) {
	if gen >= maxGen {
		return false, fmt.Errorf("%s: lease generation overflow", name)
	}
	err = c.b.b.WriteAll(ctx, markerKey(c.opts.LeasePrefix, name, gen), m.encode(), &blob.WriterOptions{
		IfNotExist:                  true,
		ContentType:                 "application/json",
		DisableContentTypeDetection: true,
	})
	switch {
	case err == nil:
		return true, nil
	case gcerrors.Code(err) == gcerrors.FailedPrecondition:
		return false, nil
	default:
		return false, fmt.Errorf("create lease marker: %w", err)
	}
}

// parallel runs fn for 0..n-1 with at most conc calls at once.
func parallel(n, conc int, fn func(i int)) {
	sem := make(chan struct{}, max(1, conc))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// tryBatch tries to lease every candidate, in parallel. It returns the
// rows it leased and those it leased to bury.
func (c *Cursor) tryBatch(ctx context.Context, cands []candidate) (rows []cursor.Row, dead []exhausted, err error) {
	got := make([]*cursor.Row, len(cands))
	buried := make([]*exhausted, len(cands))
	errs := make([]error, len(cands))
	parallel(len(cands), c.conc, func(i int) { got[i], buried[i], errs[i] = c.try(ctx, cands[i]) })
	for i := range cands {
		if got[i] != nil {
			rows = append(rows, *got[i])
		}
		if buried[i] != nil {
			dead = append(dead, *buried[i])
		}
	}
	return rows, dead, errors.Join(errs...)
}

// try leases one candidate; a nil row means it is not claimable now. A
// candidate past MaxAttempts is leased to be buried instead (buryLease),
// and returned as dead (without reading its body: its listing is its
// values).
func (c *Cursor) try(ctx context.Context, cand candidate) (row *cursor.Row, dead *exhausted, err error) {
	now := time.Now()
	next := marker{State: stateLeased, Attempt: 1, Expires: now.Add(c.lease).UnixMilli()}
	gen := int64(1)
	if n := len(cand.markers); n > 0 {
		latest := cand.markers[n-1]
		st, ok, err := c.state(ctx, latest)
		if err != nil || !ok {
			return nil, nil, err // gone: the object is moving; skip it
		}
		switch st.State {
		case stateLeased:
			if st.Expires > now.UnixMilli() {
				return nil, nil, nil
			}
		case stateDone:
			return nil, nil, c.finish(ctx, []move{{cand.name, c.opts.DonePrefix, latest.gen}})
		case stateDead:
			// The dead marker is created by a Commit, once the engine
			// recorded the row dead (or by DeadLetter, at its request).
			return nil, nil, c.finish(ctx, []move{{cand.name, c.opts.DeadPrefix, latest.gen}})
		}
		gen = latest.gen + 1
		if mx := c.spec.MaxAttempts; mx > 0 && st.Attempt >= mx {
			reason := st.Reason // kept by an earlier claim's lease to bury it
			switch {
			case reason != "":
			case st.State == stateReleased:
				reason = fmt.Sprintf("released after attempt %d of %d", st.Attempt, mx)
			default:
				reason = fmt.Sprintf("lease lapsed after attempt %d of %d", st.Attempt, mx)
			}
			dead, err := c.buryLease(ctx, cand, gen, st.Attempt, reason)
			return nil, dead, err
		}
		next.Attempt = st.Attempt + 1
	}
	won, err := c.create(ctx, cand.name, gen, next)
	if err != nil || !won {
		return nil, nil, err
	}
	values, exists, err := c.values(ctx, cand)
	if err != nil || !exists {
		// The object was moved after we listed it and every marker of its
		// past was deleted before we created ours: ours is an orphan.
		if derr := c.b.b.Delete(ctx, markerKey(c.opts.LeasePrefix, cand.name, gen)); derr != nil && gcerrors.Code(derr) != gcerrors.NotFound {
			err = errors.Join(err, fmt.Errorf("delete orphan lease marker: %w", derr))
		}
		return nil, nil, err
	}
	return &cursor.Row{
		Key:    cand.name,
		Values: values,
		Lease:  cursor.Lease{Attempt: next.Attempt, Deadline: time.UnixMilli(next.Expires), Token: token(gen)},
	}, nil, nil
}

// listingValues are the values of a row that the listing gives.
func listingValues(cand candidate) map[string]any {
	return map[string]any{
		"key":      cand.obj.Key,
		"name":     cand.name,
		"size":     cand.obj.Size,
		"modified": cand.obj.ModTime.UTC().Format(time.RFC3339Nano),
	}
}

// values builds a row's values and checks that its object still exists.
func (c *Cursor) values(ctx context.Context, cand candidate) (map[string]any, bool, error) {
	key := cand.obj.Key
	v := listingValues(cand)
	if !c.opts.ReadBody || cand.obj.Size > c.opts.MaxBodyBytes {
		if c.opts.ReadBody {
			v["body_skipped"] = true
		}
		ok, err := c.b.b.Exists(ctx, key)
		if err != nil {
			return nil, false, fmt.Errorf("stat %s: %w", key, err)
		}
		return v, ok, nil
	}
	body, err := c.b.b.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", key, err)
	}
	setBody(v, body, c.opts.BodyJSON)
	return v, true, nil
}

// setBody stores body under "body": decoded JSON when asked (falling back
// to text with body_error set), else text, or base64 with body_base64 set
// when it is not UTF-8, with or without body_json: the log holds only
// text, and JSON holding invalid UTF-8 would decode with U+FFFD in its
// place.
func setBody(v map[string]any, body []byte, asJSON bool) {
	valid := utf8.Valid(body)
	if asJSON && !valid {
		v["body_error"] = "body is not valid UTF-8"
	} else if asJSON {
		// Whole numbers as int64, as the other drivers give them (1, not
		// 1.0 in a template).
		x, err := jsonnum.Decode(body)
		if err == nil {
			v["body"] = x
			return
		}
		v["body_error"] = err.Error()
	}
	if valid {
		v["body"] = string(body)
		return
	}
	v["body"] = base64.StdEncoding.EncodeToString(body)
	v["body_base64"] = true
}

// buryLease leases the exhausted candidate cand, with generation gen, to
// be buried by the claim's Commit: a leased marker that counts no
// delivery (Attempt stays attempt) and keeps reason, so that a claim that
// takes the row after an Abort or a lapsed lease buries it for the same
// reason. Losing the race leaves the row to the winner. dead is nil when
// the row is not this claim's to bury.
func (c *Cursor) buryLease(ctx context.Context, cand candidate, gen int64, attempt int, reason string) (dead *exhausted, err error) {
	expires := time.Now().Add(c.lease).UnixMilli()
	won, err := c.create(ctx, cand.name, gen, marker{State: stateLeased, Attempt: attempt, Expires: expires, Reason: reason})
	if err != nil || !won {
		return nil, err
	}
	// A claimer that read the row's state before another buried it can
	// create the same generation again once the burier's move deleted
	// the markers: the object is gone from the prefix by then (the move
	// deletes it before the markers), so the marker is an orphan and the
	// row was reported dead already.
	ok, err := c.b.b.Exists(ctx, c.opts.Prefix+cand.name)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("stat %s: %w", c.opts.Prefix+cand.name, err)
		}
		if derr := c.b.b.Delete(ctx, markerKey(c.opts.LeasePrefix, cand.name, gen)); derr != nil && gcerrors.Code(derr) != gcerrors.NotFound {
			err = errors.Join(err, fmt.Errorf("delete orphan lease marker: %w", derr))
		}
		return nil, err
	}
	return &exhausted{
		row:    cursor.Row{Key: cand.name, Values: listingValues(cand), Lease: cursor.Lease{Attempt: attempt}},
		token:  token(gen),
		reason: reason,
	}, nil
}

// move is a row whose marker of generation gen is terminal, to be moved
// to dest.
type move struct {
	name, dest string
	gen        int64
}

// finish moves rows with a terminal marker to their destination prefix
// (copy, then delete) and deletes their markers, older generations
// before the terminal one, so that a crash half-way leaves the terminal
// marker as the latest and the next claimer finishes the move. Every step
// tolerates a concurrent finisher.
func (c *Cursor) finish(ctx context.Context, moves []move) error {
	copied := make([]bool, len(moves))
	errs := make([]error, len(moves))
	parallel(len(moves), c.conc, func(i int) {
		m := moves[i]
		src := c.opts.Prefix + m.name
		err := c.b.b.Copy(ctx, m.dest+m.name, src, nil)
		if err != nil && gcerrors.Code(err) != gcerrors.NotFound { // NotFound: moved already
			err = c.copiedAlready(ctx, src, m.dest+m.name, err)
		}
		switch {
		case err == nil:
			copied[i] = true
		case gcerrors.Code(err) != gcerrors.NotFound:
			errs[i] = fmt.Errorf("copy %s to %s: %w", src, m.dest, err)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var pending, older, terminal []string
	for i, m := range moves {
		if copied[i] {
			pending = append(pending, c.opts.Prefix+m.name)
		}
		for g := int64(1); g < m.gen; g++ {
			older = append(older, markerKey(c.opts.LeasePrefix, m.name, g))
		}
		terminal = append(terminal, markerKey(c.opts.LeasePrefix, m.name, m.gen))
	}
	for _, keys := range [][]string{pending, older, terminal} {
		if err := c.b.deleteKeys(ctx, keys, c.conc); err != nil {
			return err
		}
	}
	return nil
}

// copiedAlready says what a failed copy of src to dst means: nil when
// dst holds src's content (a concurrent finisher, or one that died before
// deleting src, copied it), an error of code NotFound when src is gone
// (moved already), copyErr otherwise (src stays where it is). Some
// servers cannot overwrite an object: versitygw's posix backend fails
// every overwrite of a key whose last segment is over 227 bytes (its
// temporary file's name would be over NAME_MAX), so a copy onto an
// earlier one fails where S3 would overwrite it with the same bytes.
func (c *Cursor) copiedAlready(ctx context.Context, src, dst string, copyErr error) error {
	sa, err := c.b.b.Attributes(ctx, src)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return err
		}
		return copyErr
	}
	da, err := c.b.b.Attributes(ctx, dst)
	if err != nil || !sameContent(sa, da) {
		return copyErr
	}
	return nil
}

// sameContent reports whether two objects' attributes show the same
// bytes: the same size and MD5 (or, where the server gives none, the
// same ETag, which S3 computes from the bytes of an object not uploaded
// in parts).
func sameContent(a, b *blob.Attributes) bool {
	if a.Size != b.Size {
		return false
	}
	if len(a.MD5) > 0 && len(b.MD5) > 0 {
		return string(a.MD5) == string(b.MD5)
	}
	return a.ETag != "" && a.ETag == b.ETag
}

// collectOrphans deletes the markers of rows that left the pending prefix
// with a terminal marker (a finisher died before deleting them), so that
// a later object of the same name starts afresh. pending holds the marker
// names of the pending objects. It also deletes, once no live lease is
// left in them, markers under a plain name that is now hashed (see
// markerName): a release before long names were hashed could write them
// where the server took the longer keys (S3 names with a last segment of
// 245 to 255 bytes); no claim reads them any more.
func (c *Cursor) collectOrphans(ctx context.Context, markers map[string][]markerRef, pending map[string]bool) {
	var orphans []string
	for name := range markers {
		if !pending[name] {
			orphans = append(orphans, name)
		}
	}
	dead := make([]bool, len(orphans))
	now := time.Now().UnixMilli()
	parallel(len(orphans), c.conc, func(i int) {
		name := orphans[i]
		ms := markers[name]
		st, ok, err := c.state(ctx, ms[len(ms)-1])
		legacy := !isHashedName(name) && markerName(c.opts.LeasePrefix, name) != name
		dead[i] = err == nil && ok && (st.State == stateDone || st.State == stateDead ||
			legacy && (st.State == stateReleased || st.Expires <= now))
	})
	var keys []string
	for i, name := range orphans {
		if dead[i] {
			for _, m := range markers[name] {
				keys = append(keys, m.key)
			}
		}
	}
	if err := c.b.deleteKeys(ctx, keys, c.conc); err != nil {
		c.log.Debug("s3prefix: delete orphan markers", "err", err)
	}
}

// transition creates, for every row, the generation after its token with
// the marker that mk returns; the rows whose new marker is terminal are
// then moved to dest(marker). Rows whose next generation exists already
// hold stale tokens.
func (c *Cursor) transition(ctx context.Context, op string, rows []cursor.Row,
	mk func(cursor.Row) marker, dest func(marker) string) error {
	if c.closed.Load() {
		return c.fail(op, cursor.ErrClosed)
	}
	var (
		mu    sync.Mutex
		stale []string
		moves []move
	)
	errs := make([]error, len(rows))
	parallel(len(rows), c.conc, func(i int) {
		r := rows[i]
		gen, err := parseToken(r.Lease.Token)
		if err != nil {
			errs[i] = fmt.Errorf("row %q: %w", r.Key, err)
			return
		}
		m := mk(r)
		won, err := c.create(ctx, r.Key, gen+1, m)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("row %q: %w", r.Key, err)
		case !won:
			stale = append(stale, r.Key)
		case m.State == stateDone || m.State == stateDead:
			if m.State == stateDead {
				c.log.Warn("s3prefix: dead-lettered", "name", r.Key, "attempt", m.Attempt, "reason", m.Reason)
			}
			moves = append(moves, move{r.Key, dest(m), gen + 1})
		}
	})
	err := errors.Join(errs...)
	if len(moves) > 0 {
		err = errors.Join(err, c.finish(ctx, moves))
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		err = errors.Join(fmt.Errorf("%w: rows %v were re-issued to another claimer", cursor.ErrStaleLease, stale), err)
	}
	if err != nil {
		return c.fail(op, err)
	}
	return nil
}

func (c *Cursor) destOf(m marker) string {
	if m.State == stateDone {
		return c.opts.DonePrefix
	}
	return c.opts.DeadPrefix
}

// Ack moves the rows' objects to the done prefix. A row whose lease was
// re-issued (its next generation exists) is refused with
// cursor.ErrStaleLease; the others are acknowledged all the same.
func (c *Cursor) Ack(ctx context.Context, rows []cursor.Row) error {
	return c.transition(ctx, "ack", rows,
		func(r cursor.Row) marker { return marker{State: stateDone, Attempt: r.Lease.Attempt} }, c.destOf)
}

// Release hands rows back for another claim, counting the delivery.
// Stale tokens are refused with cursor.ErrStaleLease. A row that has had
// Spec.MaxAttempts deliveries is released all the same: the next claim
// moves it to the dead prefix and lists it in Claim.Dead, which is how
// the engine learns that it is dead (a Release that buried it would leave
// the engine counting it failed, never dead).
func (c *Cursor) Release(ctx context.Context, rows []cursor.Row) error {
	return c.transition(ctx, "release", rows, func(r cursor.Row) marker {
		return marker{State: stateReleased, Attempt: r.Lease.Attempt}
	}, c.destOf)
}

// DeadLetter moves the rows' objects to the dead prefix at the engine's
// request; the reason is logged. Stale tokens are refused with
// cursor.ErrStaleLease.
func (c *Cursor) DeadLetter(ctx context.Context, rows []cursor.Row, reason string) error {
	return c.transition(ctx, "dead_letter", rows, func(r cursor.Row) marker {
		return marker{State: stateDead, Attempt: r.Lease.Attempt, Reason: reason}
	}, c.destOf)
}

// Close ends the cursor. Leases it holds stay until acknowledged,
// released or expired.
func (c *Cursor) Close() error {
	if !c.closed.Swap(true) {
		c.release()
	}
	return nil
}
