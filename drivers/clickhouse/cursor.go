package clickhouse

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/sqlcursor"
	"github.com/cursorflow/cursorflow/internal/sqlquote"
)

// keyColumn is the alias under which a claim reads toString(key) next to
// the source's columns.
const keyColumn = "__cursorflow_key"

// Cursor claims rows of one ClickHouse table through its claims table. It
// is a cursor.Cursor and a cursor.DeadLetterer; safe for concurrent use.
type Cursor struct {
	drv    *Driver
	cred   string
	spec   cursor.Spec
	opts   Options
	t      tables
	lease  time.Duration
	log    *slog.Logger
	closed atomic.Bool
}

var (
	_ cursor.Cursor       = (*Cursor)(nil)
	_ cursor.DeadLetterer = (*Cursor)(nil)
)

func (c *Cursor) fail(op string, err error) error {
	return &cursor.ClaimError{Kind: c.spec.Kind, Auth: c.spec.Auth, Op: op, Err: err}
}

// exec runs one statement, once more on a fresh connection if the first
// attempt lost its connection. Every statement of the driver is safe to
// repeat: the bookkeeping tables deduplicate and the queries count
// distinct tokens.
func (c *Cursor) exec(ctx context.Context, stmt string) error {
	return c.retry(ctx, func(conn driver.Conn) error { return conn.Exec(ctx, stmt) })
}

func (c *Cursor) retry(ctx context.Context, fn func(driver.Conn) error) error {
	for attempt := 0; ; attempt++ {
		conn, release, err := c.drv.conn(c.cred)
		if err != nil {
			return err
		}
		err = fn(conn)
		release()
		if err == nil || attempt > 0 || !connLost(err) || ctx.Err() != nil {
			return err
		}
		c.log.Warn("clickhouse: connection lost, retrying on a fresh one", "err", err)
		c.drv.dropConn(c.cred, conn)
	}
}

// query runs a SELECT and returns its column names and rows, values
// normalized to JSON-friendly Go values.
func (c *Cursor) query(ctx context.Context, stmt string) ([]string, [][]any, error) {
	var (
		cols []string
		out  [][]any
	)
	err := c.retry(ctx, func(conn driver.Conn) error {
		cols, out = nil, nil
		rows, err := conn.Query(ctx, stmt)
		if err != nil {
			return err
		}
		defer rows.Close()
		types := rows.ColumnTypes()
		cols = rows.Columns()
		for rows.Next() {
			ptrs := make([]any, len(types))
			for i, ct := range types {
				ptrs[i] = reflect.New(ct.ScanType()).Interface()
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			vals := make([]any, len(ptrs))
			for i, p := range ptrs {
				vals[i] = normalize(reflect.ValueOf(p).Elem().Interface())
			}
			out = append(out, vals)
		}
		return rows.Err()
	})
	return cols, out, err
}

// normalize dereferences Nullable values and converts the rest with
// sqlcursor.Normalize.
func normalize(v any) any {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil
	}
	return sqlcursor.Normalize(rv.Interface())
}

// quote returns s as a ClickHouse string literal.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(s) + "'"
}

// list returns keys as a ClickHouse array literal.
func list(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = quote(k)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// newToken returns a claim token: the claim's time in Unix milliseconds
// (fixed width, so tokens sort by time) and 64 random bits.
func newToken(at int64) string {
	b := make([]byte, 8)
	_, _ = crand.Read(b) // never fails
	return fmt.Sprintf("%013d-%s", at, hex.EncodeToString(b))
}

// tokenTime reads the claim time back from a token.
func tokenTime(tok string) (int64, error) {
	ms, _, ok := strings.Cut(tok, "-")
	at, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || at <= 0 {
		return 0, fmt.Errorf("lease token %q was not issued by the clickhouse driver", tok)
	}
	return at, nil
}

// SQL fragments over the claims table. A claim is "ended" when its holder
// released it or withdrew it after losing; it is "active" while it is
// neither ended nor expired.
func (c *Cursor) ended() string {
	return `(SELECT key, token FROM ` + c.t.claims + ` WHERE kind != 'claim')`
}

func (c *Cursor) withdrawn() string {
	return `(SELECT key, token FROM ` + c.t.claims + ` WHERE kind = 'withdraw')`
}

func (c *Cursor) activeKeys(now int64) string {
	return `(SELECT key FROM ` + c.t.claims + ` WHERE kind = 'claim' AND expires > ` + strconv.FormatInt(now, 10) +
		` AND (key, token) NOT IN ` + c.ended() + `)`
}

// exhaustedKeys are the keys delivered MaxAttempts times or more.
func (c *Cursor) exhaustedKeys() string {
	return `(SELECT key FROM ` + c.t.claims + ` WHERE kind = 'claim' AND (key, token) NOT IN ` + c.withdrawn() +
		` GROUP BY key HAVING uniqExact(token) >= ` + strconv.Itoa(c.spec.MaxAttempts) + `)`
}

// source returns the FROM item of the source rows: the table, or the
// claim template rendered with the loop's scope, __frame_max_rows,
// __worker_slot_id and __worker_slot_index, its %(name)s placeholders
// filled.
func (c *Cursor) source(limit int) (string, error) {
	if c.spec.Claim == nil {
		return c.t.src, nil
	}
	vars := make(map[string]any, len(c.spec.Scope)+3)
	maps.Copy(vars, c.spec.Scope)
	vars["__frame_max_rows"] = limit
	sqlcursor.SlotVars(vars, c.spec)
	q, err := sqlcursor.Render(c.spec.Claim, vars, sqlquote.ClickHouse)
	if err != nil {
		return "", fmt.Errorf("render claim: %w", err)
	}
	q = strings.TrimRight(strings.TrimSpace(q), ";")
	if q == "" {
		return "", errors.New("the claim rendered empty")
	}
	return "(" + q + ")", nil
}

// candidates selects toString(key) AS k of the source rows that are
// neither done nor dead, nor held by an active claim.
func (c *Cursor) candidates(src string, now int64) string {
	where := ""
	if c.opts.Where != "" {
		where = ` WHERE (` + c.opts.Where + `)`
	}
	return `SELECT k FROM (SELECT toString(` + c.t.key + `) AS k FROM ` + src + where + `)
	 WHERE k NOT IN (SELECT key FROM ` + c.t.done + `) AND k NOT IN (SELECT key FROM ` + c.t.dead + `)
	   AND k NOT IN ` + c.activeKeys(now)
}

// Claim leases up to limit rows (see claim) and returns them as a claim
// held by their claim records from the start: Commit does nothing for
// them, Abort releases them (counting the delivery), and the rows of a
// claimer that died are claimed again once their claims expire.
//
// Rows past MaxAttempts are claimed too and listed in the claim's Dead,
// whether or not it returns rows: Commit (once the engine recorded them
// dead) records them in the dead table, Abort withdraws their claims, and
// a claimer that dies before Commit leaves them to the claim after their
// lease, which lists them dead again. A dead record made in Claim would
// be lost to the log with a record that never comes.
func (c *Cursor) Claim(ctx context.Context, limit int) (*cursor.Claim, error) {
	rows, dead, err := c.claim(ctx, limit)
	if err != nil {
		// Hand back what the claim holds rather than strand it until its
		// lease lapses.
		if gerr := c.giveBack(context.WithoutCancel(ctx), rows, dead); gerr != nil {
			c.log.Warn("clickhouse: give back after a failed claim", "rows", len(rows), "dead", len(dead), "err", gerr)
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

// exhausted is a row past MaxAttempts that a claim holds to bury (as
// Claim.Dead lists it: no lease of its own to the engine) and the token
// of that claim.
type exhausted struct {
	row   cursor.Row
	token string
}

// held returns the rows of dead with their claims' tokens.
func held(dead []exhausted) []cursor.Row {
	rows := make([]cursor.Row, len(dead))
	for i, d := range dead {
		rows[i] = d.row
		rows[i].Lease.Token = d.token
	}
	return rows
}

// buryHeld records the exhausted rows dead, held by a claim now on record,
// in the dead table (the claim's Commit). A row whose claim expired and
// that another claim took since is refused as stale: that claim lists it
// dead.
func (c *Cursor) buryHeld(ctx context.Context, dead []exhausted) error {
	if len(dead) == 0 {
		return nil
	}
	reason := fmt.Sprintf("lease lapsed or released after the last of %d deliveries", c.spec.MaxAttempts)
	return c.settle(ctx, "dead_letter", held(dead), false, func(tok string, rows []cursor.Row) error {
		return c.bury(ctx, tok, keysOf(rows), reason)
	})
}

// giveBack releases rows (counting the delivery) and withdraws the claims
// of the exhausted rows dead (counting none), so that the next claim
// buries them and lists them dead.
func (c *Cursor) giveBack(ctx context.Context, rows []cursor.Row, dead []exhausted) error {
	var err error
	if len(rows) > 0 {
		err = c.Release(ctx, rows)
	}
	byTok := map[string][]string{}
	for _, d := range dead {
		byTok[d.token] = append(byTok[d.token], d.row.Key)
	}
	for tok, keys := range byTok {
		if werr := c.record(ctx, tok, keys, "withdraw"); werr != nil {
			err = errors.Join(err, c.fail("release", fmt.Errorf("withdraw claims of exhausted rows: %w", werr)))
		}
	}
	return err
}

// claim leases up to limit rows. It inserts a claim with a fresh token
// for up to limit candidates (INSERT ... SELECT), then reads back which of
// them this token won: a claim wins when, once it is visible, no other
// active claim of the same key is. Lost claims are withdrawn at once; if
// every candidate was contested, Claim tries again with new candidates.
// Rows past MaxAttempts deliveries are claimed to be buried first, and
// are returned as dead. On an error, dead is what the claim holds so far.
func (c *Cursor) claim(ctx context.Context, limit int) (rows []cursor.Row, dead []exhausted, err error) {
	if c.closed.Load() {
		return nil, nil, c.fail("claim", cursor.ErrClosed)
	}
	if limit < 1 {
		return nil, nil, c.fail("claim", fmt.Errorf("max rows %d, want at least 1", limit))
	}
	src, err := c.source(limit)
	if err != nil {
		return nil, nil, c.fail("claim", err)
	}
	for round := 0; ; round++ {
		// Each round buries first: a row can become exhausted while
		// another claimer's contesting claim hides it, which the loser
		// withdraws before it tries again.
		var buriedContested int
		if c.spec.MaxAttempts > 0 {
			buried, n, err := c.buryExhausted(ctx, src)
			dead = append(dead, buried...)
			if err != nil {
				return nil, dead, c.fail("claim", err)
			}
			buriedContested = n
		}
		rows, late, contested, err := c.claimRound(ctx, src, limit)
		dead = append(dead, late...)
		if err != nil {
			return nil, dead, c.fail("claim", err)
		}
		// A claim that returns no row tells the engine that the source is
		// drained for this slot: make it only when nothing was contested,
		// since the rows another claimer contested (exhausted ones too)
		// may be left to no one if both contenders lost.
		if len(rows) > 0 || (contested == 0 && buriedContested == 0) {
			return rows, dead, nil
		}
		if err := c.pause(ctx, round, "candidate"); err != nil {
			return nil, dead, c.fail("claim", err)
		}
	}
}

// pause follows a round in which every candidate (what) was contested:
// it waits briefly, at random, so that the contenders stop picking the
// same rows at the same moment, and fails after MaxRounds rounds.
func (c *Cursor) pause(ctx context.Context, round int, what string) error {
	if round+1 >= c.drv.cfg.MaxRounds {
		return fmt.Errorf("every %s was contested in %d rounds", what, round+1)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(1+rand.IntN(10*(round+1))) * time.Millisecond):
		return nil
	}
}

// maxBury bounds the rows one claim moves to the dead table; the next
// claim moves the rest.
const maxBury = 10000

// buryExhausted claims the keys that have had MaxAttempts deliveries and
// are not held by an active claim, as claimRound claims candidates, so
// that of two claimers burying a row only one reports it dead, and
// returns their rows, for the claim's Commit to record in the dead table
// (buryHeld); contested counts the rows it lost to another claimer.
func (c *Cursor) buryExhausted(ctx context.Context, src string) (dead []exhausted, contested int, err error) {
	now := time.Now()
	cands := c.candidates(src, now.UnixMilli()) + ` AND k IN ` + c.exhaustedKeys()
	tok, won, attempts, contested, err := c.claimKeys(ctx, cands, maxBury, now)
	if err != nil || len(won) == 0 {
		return nil, contested, err
	}
	// The candidate query is no proof of exhaustion: its subqueries read
	// the claims table each at its own moment, so a rival's claim made in
	// between (after activeKeys read, before exhaustedKeys did) looks like
	// a delivery there, neither active nor withdrawn, though the rival
	// then lost (to this very claim, say) and withdrew. Decide from the
	// read-back instead, one scan that counted the rivals and the attempts
	// together: a row buried on the candidate query's word alone went to
	// the dead letter with a delivery short of MaxAttempts. Give back the
	// rows that are not exhausted, as claimKeys gives back the ones it
	// lost, and count them contested so that Claim does not report a
	// drained source while they are hidden.
	var early []string
	won = slices.DeleteFunc(won, func(k string) bool {
		if attempts[k]-1 < c.spec.MaxAttempts { // tok's own claim is no delivery
			early = append(early, k)
			return true
		}
		return false
	})
	if len(early) > 0 {
		contested += len(early)
		if err := c.record(ctx, tok, early, "withdraw"); err != nil {
			// Held until the bury claims expire: delayed, never lost.
			c.log.Warn("clickhouse: withdraw bury claims of rows not exhausted", "rows", len(early), "err", err)
		}
	}
	if len(won) == 0 {
		return nil, contested, nil
	}
	return c.holdWon(ctx, src, tok, won, attempts), contested, nil
}

// holdWon returns the rows of keys, won by the claim tok to be buried;
// attempts counts each key's claims, tok's included, which is no
// delivery.
func (c *Cursor) holdWon(ctx context.Context, src, tok string, keys []string, attempts map[string]int) []exhausted {
	delivered := make(map[string]int, len(keys))
	for _, k := range keys {
		delivered[k] = attempts[k] - 1
	}
	rows, err := c.fetch(ctx, src, keys, "", delivered, time.Time{})
	if err != nil {
		// Dead all the same: report the keys alone.
		c.log.Warn("clickhouse: read exhausted rows", "rows", len(keys), "err", err)
		rows = make([]cursor.Row, len(keys))
		for i, k := range keys {
			rows[i] = cursor.Row{Key: k, Lease: cursor.Lease{Attempt: delivered[k]}}
		}
	}
	dead := make([]exhausted, len(rows))
	for i, r := range rows {
		dead[i] = exhausted{row: r, token: tok}
	}
	return dead
}

// claimRound makes one claim attempt; contested counts the candidates
// another claimer contested. A candidate can have been delivered for the
// last time between the candidate query and the claim (another claimer
// claimed and released it in between, so no rival is left to see): the
// claim then holds it past MaxAttempts to bury it, returning it in dead,
// rather than deliver it once more.
func (c *Cursor) claimRound(ctx context.Context, src string, limit int) (rows []cursor.Row, dead []exhausted, contested int, err error) {
	now := time.Now()
	at := now.UnixMilli()
	order := `cityHash64(k, ` + quote(newToken(at)) + `)`
	cands := c.candidates(src, at)
	if c.spec.MaxAttempts > 0 {
		cands += ` AND k NOT IN ` + c.exhaustedKeys()
	}
	if c.opts.OrderBy != "" {
		// The order is over the source's columns: pick the keys there.
		where := ""
		if c.opts.Where != "" {
			where = ` AND (` + c.opts.Where + `)`
		}
		cands = `SELECT toString(` + c.t.key + `) AS k FROM ` + src + ` WHERE k IN (` + cands + `)` + where +
			` ORDER BY ` + c.opts.OrderBy
		order = ""
	}
	if order != "" {
		cands += ` ORDER BY ` + order
	}
	tok, won, attempts, contested, err := c.claimKeys(ctx, cands, limit, now)
	if err != nil || len(won) == 0 {
		return nil, nil, contested, err
	}
	if mx := c.spec.MaxAttempts; mx > 0 {
		var late []string
		won = slices.DeleteFunc(won, func(k string) bool {
			if attempts[k] > mx {
				late = append(late, k)
				return true
			}
			return false
		})
		if len(late) > 0 {
			dead = c.holdWon(ctx, src, tok, late, attempts)
			if len(won) == 0 {
				// Nothing left to deliver: claim again, as after a round
				// whose candidates were all contested.
				return nil, dead, max(contested, len(late)), nil
			}
		}
	}
	rows, err = c.fetch(ctx, src, won, tok, attempts, time.UnixMilli(now.Add(c.lease).UnixMilli()))
	if err != nil {
		// Hand the rows back rather than strand them until they expire.
		_ = c.record(context.WithoutCancel(ctx), tok, won, "release")
		return nil, dead, 0, err
	}
	return rows, dead, contested, nil
}

// claimKeys claims up to limit keys of the candidate query cands (a
// SELECT of k) with a fresh token taken at now: it inserts a claim for
// each, then reads back which of them have no active rival and are
// neither done nor dead. It withdraws the others and returns the keys won
// with their attempts (claims kept, this one included) and how many were
// contested.
func (c *Cursor) claimKeys(ctx context.Context, cands string, limit int, now time.Time) (tok string, won []string, attempts map[string]int, contested int, err error) {
	at := now.UnixMilli()
	tok = newToken(at)
	expires := now.Add(c.lease).UnixMilli()
	insert := `INSERT INTO ` + c.t.claims + ` (key, token, kind, expires, at)
	 SELECT k, ` + quote(tok) + `, 'claim', toUInt64(` + strconv.FormatInt(expires, 10) + `), toUInt64(` + strconv.FormatInt(at, 10) + `)
	 FROM (` + cands + ` LIMIT ` + strconv.Itoa(limit) + `)`
	if err := c.exec(ctx, insert); err != nil {
		return "", nil, nil, 0, fmt.Errorf("insert claims: %w", err)
	}
	if hook := c.drv.claimInserted; hook != nil {
		hook(tok)
	}
	// The claims are visible now (a synchronous insert on one node). Read
	// back, with the current time, which of them have no active rival.
	// One scan of the claims table folds each token's records (its claim,
	// and its release or withdrawal if any), so that the rivals and the
	// attempts are counted from the same records: two subqueries would
	// each read the table at their own moment, and a withdrawal landing
	// between them made a token neither a rival nor withdrawn, counting a
	// delivery that never was.
	check := strconv.FormatInt(time.Now().UnixMilli(), 10)
	readBack := `SELECT key,
	   sum(token != ` + quote(tok) + ` AND ended = 0 AND expires > ` + check + `) AS rivals,
	   sum(withdrawn = 0) AS attempts,
	   max(key IN (SELECT key FROM ` + c.t.done + `) OR key IN (SELECT key FROM ` + c.t.dead + `)) AS finished
	 FROM (
	   SELECT key, token, max(kind = 'claim') AS claimed, max(kind != 'claim') AS ended,
	          max(kind = 'withdraw') AS withdrawn, max(expires) AS expires
	   FROM ` + c.t.claims + `
	   WHERE key IN (SELECT key FROM ` + c.t.claims + ` WHERE token = ` + quote(tok) + ` AND kind = 'claim')
	   GROUP BY key, token)
	 WHERE claimed = 1
	 GROUP BY key`
	_, res, err := c.query(ctx, readBack)
	if err != nil {
		return "", nil, nil, 0, fmt.Errorf("read back claims: %w", err)
	}
	var lost []string
	attempts = make(map[string]int, len(res))
	for _, r := range res {
		key, _ := r[0].(string)
		rivals, _ := r[1].(int64)
		n, _ := r[2].(int64)
		finished, _ := r[3].(int64)
		if rivals == 0 && finished == 0 {
			won = append(won, key)
			attempts[key] = int(n)
		} else {
			lost = append(lost, key)
		}
	}
	if len(lost) > 0 {
		if err := c.record(ctx, tok, lost, "withdraw"); err != nil {
			// The lost claims stay active until they expire: the rows are
			// delayed, never claimed twice.
			c.log.Warn("clickhouse: withdraw lost claims", "rows", len(lost), "err", err)
		}
	}
	return tok, won, attempts, len(lost), nil
}

// fetch reads the won rows' values from the source.
func (c *Cursor) fetch(ctx context.Context, src string, keys []string, tok string, attempts map[string]int, deadline time.Time) ([]cursor.Row, error) {
	stmt := `SELECT ` + c.opts.Columns + `, toString(` + c.t.key + `) AS ` + keyColumn + ` FROM ` + src +
		` WHERE toString(` + c.t.key + `) IN (SELECT arrayJoin(` + list(keys) + `))`
	cols, res, err := c.query(ctx, stmt)
	if err != nil {
		return nil, fmt.Errorf("read claimed rows: %w", err)
	}
	rows := make([]cursor.Row, 0, len(res))
	seen := make(map[string]bool, len(res))
	for _, r := range res {
		key, _ := r[len(r)-1].(string)
		if seen[key] {
			continue // a source with duplicate keys delivers the key once
		}
		seen[key] = true
		vals := make(map[string]any, len(cols)-1)
		for i, col := range cols[:len(cols)-1] {
			vals[col] = r[i]
		}
		rows = append(rows, cursor.Row{Key: key, Values: vals,
			Lease: cursor.Lease{Attempt: max(1, attempts[key]), Deadline: deadline, Token: tok}})
	}
	slices.SortFunc(rows, func(a, b cursor.Row) int { return strings.Compare(a.Key, b.Key) })
	return rows, nil
}

// record inserts one claims-table record of kind for each key.
func (c *Cursor) record(ctx context.Context, tok string, keys []string, kind string) error {
	stmt := `INSERT INTO ` + c.t.claims + ` (key, token, kind, expires, at)
	 SELECT arrayJoin(` + list(keys) + `), ` + quote(tok) + `, ` + quote(kind) + `, toUInt64(0), toUInt64(` +
		strconv.FormatInt(time.Now().UnixMilli(), 10) + `)`
	return c.exec(ctx, stmt)
}

// stale returns the keys among keys (claimed with tok) that a later claim
// of another token holds or held: a claim made after tok's that was not
// withdrawn. While tok's lease runs, none can (see the claim protocol in
// doc.go), so nothing is stale; this assumes the claimers' clocks agree to
// well within the lease.
func (c *Cursor) stale(ctx context.Context, tok string, keys []string) (map[string]bool, error) {
	at, err := tokenTime(tok)
	if err != nil {
		return nil, err
	}
	if c.spec.Lease > 0 && time.Now().UnixMilli() < at+c.spec.Lease.Milliseconds() {
		// Our claim is still live: a claimer that inserted after us read
		// it back and must withdraw, so no later claim can hold the rows.
		// Checking anyway would count claims that are about to withdraw.
		return map[string]bool{}, nil
	}
	stmt := `SELECT DISTINCT key FROM ` + c.t.claims + `
	 WHERE kind = 'claim' AND key IN (SELECT arrayJoin(` + list(keys) + `)) AND token != ` + quote(tok) + `
	   AND at > ` + strconv.FormatInt(at, 10) + ` AND (key, token) NOT IN ` + c.withdrawn()
	_, res, err := c.query(ctx, stmt)
	if err != nil {
		return nil, fmt.Errorf("check leases: %w", err)
	}
	out := make(map[string]bool, len(res))
	for _, r := range res {
		k, _ := r[0].(string)
		out[k] = true
	}
	return out, nil
}

// settle groups rows by token, leaves out the stale ones and calls do
// with the rest; stale rows are reported with cursor.ErrStaleLease.
// verify re-checks after do, for operations that must not race a
// reclaimer (Ack).
func (c *Cursor) settle(ctx context.Context, op string, rows []cursor.Row, verify bool,
	do func(tok string, rows []cursor.Row) error) error {
	if c.closed.Load() {
		return c.fail(op, cursor.ErrClosed)
	}
	byTok := map[string][]cursor.Row{}
	var toks []string
	for _, r := range rows {
		if _, ok := byTok[r.Lease.Token]; !ok {
			toks = append(toks, r.Lease.Token)
		}
		byTok[r.Lease.Token] = append(byTok[r.Lease.Token], r)
	}
	var stale []string
	var errs []error
	for _, tok := range toks {
		group := byTok[tok]
		st, err := c.stale(ctx, tok, keysOf(group))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fresh := slices.DeleteFunc(slices.Clone(group), func(r cursor.Row) bool { return st[r.Key] })
		for k := range st {
			stale = append(stale, k)
		}
		if len(fresh) == 0 {
			continue
		}
		if err := do(tok, fresh); err != nil {
			errs = append(errs, err)
			continue
		}
		if verify {
			// A reclaim that became visible between the check and the
			// record: the record stands (the row was processed), but the
			// holder learns that it no longer held the row.
			st, err := c.stale(ctx, tok, keysOf(fresh))
			if err != nil {
				errs = append(errs, err)
			}
			for k := range st {
				stale = append(stale, k)
			}
		}
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		errs = append([]error{fmt.Errorf("%w: rows %v were re-issued to another claimer", cursor.ErrStaleLease, stale)}, errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return c.fail(op, err)
	}
	return nil
}

func keysOf(rows []cursor.Row) []string {
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	return keys
}

// Ack records the rows as done. Rows whose lease was re-issued are
// refused with cursor.ErrStaleLease.
func (c *Cursor) Ack(ctx context.Context, rows []cursor.Row) error {
	return c.settle(ctx, "ack", rows, true, func(tok string, rows []cursor.Row) error {
		stmt := `INSERT INTO ` + c.t.done + ` (key, token, at) SELECT arrayJoin(` + list(keysOf(rows)) + `), ` +
			quote(tok) + `, toUInt64(` + strconv.FormatInt(time.Now().UnixMilli(), 10) + `)`
		if err := c.exec(ctx, stmt); err != nil {
			return fmt.Errorf("record done: %w", err)
		}
		return nil
	})
}

// Release ends the rows' claims so that the next claim gets them again,
// counting the delivery. Stale tokens are refused with
// cursor.ErrStaleLease. A row that has had MaxAttempts deliveries is
// released all the same: the next claim moves it to the dead table and
// lists it in Claim.Dead, which is how the engine learns that it is dead
// (a Release that buried it would leave the engine counting it failed,
// never dead).
func (c *Cursor) Release(ctx context.Context, rows []cursor.Row) error {
	return c.settle(ctx, "release", rows, false, func(tok string, rows []cursor.Row) error {
		if err := c.record(ctx, tok, keysOf(rows), "release"); err != nil {
			return fmt.Errorf("record release: %w", err)
		}
		return nil
	})
}

// DeadLetter records the rows in the dead table with reason. Stale tokens
// are refused with cursor.ErrStaleLease.
func (c *Cursor) DeadLetter(ctx context.Context, rows []cursor.Row, reason string) error {
	return c.settle(ctx, "dead_letter", rows, false, func(tok string, rows []cursor.Row) error {
		return c.bury(ctx, tok, keysOf(rows), reason)
	})
}

func (c *Cursor) bury(ctx context.Context, tok string, keys []string, reason string) error {
	stmt := `INSERT INTO ` + c.t.dead + ` (key, token, reason, at) SELECT arrayJoin(` + list(keys) + `), ` +
		quote(tok) + `, ` + quote(reason) + `, toUInt64(` + strconv.FormatInt(time.Now().UnixMilli(), 10) + `)`
	if err := c.exec(ctx, stmt); err != nil {
		return fmt.Errorf("record dead letter: %w", err)
	}
	c.log.Warn("clickhouse: dead-lettered", "rows", keys, "reason", reason)
	return nil
}

// Close ends the cursor. Claims it holds stay until acknowledged,
// released or expired.
func (c *Cursor) Close() error {
	c.closed.Store(true)
	return nil
}
