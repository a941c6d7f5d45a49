package redisstream

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/internal/clientcache"
)

// DefaultLease is the lease taken on claimed entries when the Spec names
// none: how long an entry stays with its consumer before another claim
// may take it over.
const DefaultLease = time.Minute

// Config configures a Driver.
type Config struct {
	// PoolSize caps each client's connection pool; the driver keeps one
	// client per credential. Defaults to go-redis's default (10 per CPU).
	PoolSize int
	// Logger receives dead-letter notices and option warnings when a Spec
	// carries no logger of its own. Defaults to slog.Default().
	Logger *slog.Logger
}

// Driver is the Redis Streams cursor driver (go-redis v9, Redis 6.2 or
// later). It keeps one client per credential; Open is cheap. Safe for
// concurrent use.
type Driver struct {
	cfg     Config
	log     *slog.Logger
	clients *clientcache.Cache[*redis.Client]
	mu      sync.Mutex
	groups  map[string]bool // credential \x00 stream \x00 group known to exist
}

var _ cursor.Driver = (*Driver)(nil)

// New returns a driver. Clients are created lazily, by the first Open of
// each credential.
func New(cfg Config) *Driver {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Driver{cfg: cfg, log: log, clients: clientcache.New((*redis.Client).Close), groups: make(map[string]bool)}
}

// OptionKeys lists the options the driver reads (cursor.OptionKeyLister).
func (d *Driver) OptionKeys() []string {
	return []string{OptStream, OptGroup, OptConsumer, OptDeadLetterStream, OptStart, OptDeleteAcked, OptURL}
}

// Features reports what the driver guarantees: batch claims, redelivery
// of entries whose lease (the consumer group's idle time) ran out,
// acknowledgement by XACK, delivery counts as attempts, a dead-letter
// stream, and fencing: Ack and Release refuse an entry that was
// redelivered since the token was issued. Entries are not strictly
// claimed in stream order, since reclaimed entries come first.
func (d *Driver) Features() cursor.Features {
	return cursor.Features{
		BatchClaim:  true,
		LeaseExpiry: true,
		NeedsAck:    true,
		DeadLetter:  true,
		Fencing:     true,
		Attempts:    true,
	}
}

// Open returns a cursor on the stream that spec.Options names, in the
// Redis that spec.Credential (a redis:// or rediss:// URL) names. It
// creates the consumer group (and the stream) if they do not exist.
func (d *Driver) Open(ctx context.Context, spec cursor.Spec) (cursor.Cursor, error) {
	log := spec.Logger
	if log == nil {
		log = d.log
	}
	log = log.With("cursor", spec.Kind, "auth", spec.Auth, "loop_id", spec.LoopID, "slot", spec.SlotID)
	c := &Cursor{spec: spec, log: log}
	opts, err := ParseOptions(spec.Options, log)
	if err != nil {
		return nil, c.fail("open", err)
	}
	if opts.Group == "" {
		if spec.LoopID == "" {
			return nil, c.fail("open", fmt.Errorf("option %q is required when the spec has no loop id", OptGroup))
		}
		opts.Group = "cursorflow:" + spec.LoopID
	}
	c.opts = opts
	c.errors = lastErrorKey(opts.Stream, opts.Group)
	c.consumer = opts.Consumer + "-" + strconv.Itoa(spec.SlotID)
	c.lease = spec.Lease
	switch {
	case c.lease <= 0:
		c.lease = DefaultLease
	case c.lease < time.Millisecond:
		// XAUTOCLAIM counts idle time in milliseconds; 0 would take over
		// every pending entry at once.
		c.lease = time.Millisecond
	}
	client, err := d.client(spec.Credential)
	if err != nil {
		return nil, c.fail("open", err)
	}
	c.rdb = client
	c.ensureGroup = func(ctx context.Context, force bool) error {
		return d.ensureGroup(ctx, client, spec.Credential, opts, force)
	}
	if err := c.ensureGroup(ctx, false); err != nil {
		return nil, c.fail("open", err)
	}
	return c, nil
}

var _ cursor.Finisher = (*Driver)(nil)

// Finish destroys the consumer group the driver named for spec's loop run
// ("cursorflow:" + the loop id), with its pending list, once the engine
// says the run is over for good (see cursor.Finisher). A group the cursor
// block names is left alone, as is a spec without a loop id; a group or
// stream that no longer exists is not an error.
func (d *Driver) Finish(ctx context.Context, spec cursor.Spec) error {
	opts, err := ParseOptions(spec.Options, nil)
	if err != nil {
		return &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "finish", Err: err}
	}
	if opts.Group != "" || spec.LoopID == "" {
		return nil
	}
	opts.Group = "cursorflow:" + spec.LoopID
	client, err := d.client(spec.Credential)
	if err != nil {
		return &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "finish", Err: err}
	}
	// Forget the group first: a cursor of the run still open would create
	// it again rather than fail on NOGROUP.
	d.mu.Lock()
	delete(d.groups, spec.Credential+"\x00"+opts.Stream+"\x00"+opts.Group)
	d.mu.Unlock()
	err = client.XGroupDestroy(ctx, opts.Stream, opts.Group).Err()
	if err != nil && !isNoStream(err) {
		return &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "finish",
			Err: fmt.Errorf("destroy group %q on stream %q: %w", opts.Group, opts.Stream, err)}
	}
	// The last errors of entries the group still held went with it.
	if err := client.Del(ctx, lastErrorKey(opts.Stream, opts.Group)).Err(); err != nil {
		return &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "finish",
			Err: fmt.Errorf("delete the last errors of group %q on stream %q: %w", opts.Group, opts.Stream, err)}
	}
	return nil
}

// lastErrorKey is the hash in which the driver keeps, for group on
// stream, the last error of each entry the engine handed back after its
// body failed (field: the entry id), until the entry is acknowledged or
// dead-lettered, which copies it to the dead-letter entry as
// cursorflow_last_error. The key starts with the stream's name, so a
// stream named with a hash tag ({jobs}) keeps it in the stream's hash
// slot in Redis Cluster.
func lastErrorKey(stream, group string) string {
	return stream + ":cursorflow:last_error:" + group
}

// isNoStream reports whether err is Redis refusing an XGROUP on a key
// that does not exist (the stream was deleted: its groups went with it).
func isNoStream(err error) bool {
	return strings.Contains(err.Error(), "requires the key to exist")
}

func (d *Driver) client(credential string) (*redis.Client, error) {
	return d.clients.Get(credential, func() (*redis.Client, error) { return d.newClient(credential) })
}

func (d *Driver) newClient(credential string) (*redis.Client, error) {
	if strings.TrimSpace(credential) == "" {
		return nil, errors.New("empty credential: want a redis:// URL")
	}
	o, err := redis.ParseURL(credential)
	if err != nil {
		// The parse error may quote the URL, password and all.
		return nil, errors.New("the credential is not a valid redis:// URL")
	}
	if d.cfg.PoolSize > 0 {
		o.PoolSize = d.cfg.PoolSize
	}
	return redis.NewClient(o), nil
}

// ensureGroup creates the group at opts.Start (and the stream) unless
// this driver already saw it; force checks again after NOGROUP.
func (d *Driver) ensureGroup(ctx context.Context, c *redis.Client, credential string, opts Options, force bool) error {
	key := credential + "\x00" + opts.Stream + "\x00" + opts.Group
	d.mu.Lock()
	known := d.groups[key]
	d.mu.Unlock()
	if known && !force {
		return nil
	}
	err := c.XGroupCreateMkStream(ctx, opts.Stream, opts.Group, opts.Start).Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("create group %q on stream %q: %w", opts.Group, opts.Stream, err)
	}
	d.mu.Lock()
	d.groups[key] = true
	d.mu.Unlock()
	return nil
}

// Close closes every client. Cursors opened earlier fail afterwards.
func (d *Driver) Close() error {
	err := d.clients.Close()
	d.mu.Lock()
	d.groups = make(map[string]bool)
	d.mu.Unlock()
	return err
}

// Cursor claims entries of one stream for one consumer of one group. It
// is a cursor.Cursor and a cursor.DeadLetterer.
type Cursor struct {
	spec        cursor.Spec
	opts        Options
	consumer    string
	errors      string // lastErrorKey of the stream and group
	lease       time.Duration
	rdb         *redis.Client
	ensureGroup func(ctx context.Context, force bool) error
	log         *slog.Logger
	closed      atomic.Bool
}

var (
	_ cursor.Cursor       = (*Cursor)(nil)
	_ cursor.DeadLetterer = (*Cursor)(nil)
)

func (c *Cursor) fail(op string, err error) error {
	return &cursor.ClaimError{Kind: c.spec.Kind, Auth: c.spec.Auth, Op: op, Err: err}
}

// run runs a script, recreating the group once if it vanished.
func (c *Cursor) run(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, error) {
	v, err := s.Run(ctx, c.rdb, keys, args...).Result()
	if err != nil && strings.Contains(err.Error(), "NOGROUP") {
		if gerr := c.ensureGroup(ctx, true); gerr != nil {
			return nil, gerr
		}
		v, err = s.Run(ctx, c.rdb, keys, args...).Result()
	}
	return v, err
}

// runClaimed runs script s about entries already claimed (ack, release,
// dead letter). Unlike run, it never creates the group again: a group
// that is gone (NOGROUP; its loop run is over and Finish removed it, or
// someone destroyed it) holds none of the entries, so a new one would
// settle nothing and, named for a loop run that is over, stay in the
// source for good. gone says so.
func (c *Cursor) runClaimed(ctx context.Context, s *redis.Script, keys []string, args ...any) (v any, gone bool, err error) {
	v, err = s.Run(ctx, c.rdb, keys, args...).Result()
	if err != nil && strings.Contains(err.Error(), "NOGROUP") {
		return nil, true, nil
	}
	return v, false, err
}

// Claim leases up to max entries (see claim) and returns them as a claim
// held by the group's pending list from the start: Commit does nothing
// for them, Abort releases them (the next claim takes them again,
// counting a delivery), and the entries of a claimer that died come back
// when the lease runs out.
//
// Entries past Spec.MaxAttempts deliveries are held the same way and
// listed in the claim's Dead, whether or not it returns rows: Commit
// (which the engine calls once it recorded them dead) copies them to the
// dead-letter stream and acknowledges them, if the claim still holds
// them; Abort hands them back as they were before the claim, and a
// claimer that dies before Commit leaves them to come back after the
// lease: either way a later claim lists them dead again. Burying them
// while claiming would leave them dead-lettered with nothing on record
// when the engine's record never comes.
func (c *Cursor) Claim(ctx context.Context, max int) (*cursor.Claim, error) {
	rows, held, more, err := c.claim(ctx, max)
	if err != nil {
		return nil, err
	}
	abort := func(ctx context.Context) error {
		var err error
		if len(rows) > 0 {
			err = c.Release(ctx, rows)
		}
		if len(held) > 0 {
			err = errors.Join(err, c.fenced(ctx, "release", unclaimDeadScript, held, c.lease.Milliseconds()+1, false))
		}
		return err
	}
	claim := cursor.NewClaim(rows, func(ctx context.Context) error { return c.bury(ctx, held) }, abort)
	claim.More = more
	// The engine learns of the dead entries by key; their lease tokens stay
	// with the claim, which alone settles them.
	for _, r := range held {
		r.Lease = cursor.Lease{Attempt: r.Lease.Attempt}
		claim.Dead = append(claim.Dead, r)
	}
	return claim, nil
}

// claim leases up to max entries: first entries whose consumer held them
// longer than the lease without an Ack (XAUTOCLAIM), then new ones
// (XREADGROUP). Entries past Spec.MaxAttempts deliveries come back apart,
// as dead: held by this consumer like the rows (with lease tokens), not to
// run. Zero rows means that nothing is new and nothing is overdue (other
// than dead entries); entries other consumers hold within their lease are
// theirs.
func (c *Cursor) claim(ctx context.Context, max int) (rows, dead []cursor.Row, more bool, err error) {
	if c.closed.Load() {
		return nil, nil, false, c.fail("claim", cursor.ErrClosed)
	}
	if max < 1 {
		return nil, nil, false, c.fail("claim", fmt.Errorf("max rows %d, want at least 1", max))
	}
	start := time.Now()
	v, err := c.run(ctx, claimScript, []string{c.opts.Stream},
		c.opts.Group, c.consumer, max, c.lease.Milliseconds(), max0(c.spec.MaxAttempts))
	if err != nil {
		return nil, nil, false, c.fail("claim", err)
	}
	dead, rows, err = parseClaim(v)
	if err != nil {
		// The script ran: the entries it claimed, dead or not, come back
		// when the lease runs out.
		return nil, nil, false, c.fail("claim", err)
	}
	deadline := start.Add(c.lease)
	for i := range rows {
		rows[i].Lease.Deadline = deadline
	}
	for i := range dead {
		dead[i].Lease.Deadline = deadline
	}
	return rows, dead, claimMore(v), nil
}

// bury copies the entries past max_attempts that a claim held, now on the
// engine's record as dead, to the dead-letter stream and acknowledges them
// (the claim's Commit). An entry whose lease ran out and that another
// claim took over since is left to that claim, which lists it dead too,
// and reported with an error wrapping cursor.ErrStaleLease.
func (c *Cursor) bury(ctx context.Context, held []cursor.Row) error {
	if len(held) == 0 {
		return nil
	}
	if c.closed.Load() {
		return c.fail("dead_letter", cursor.ErrClosed)
	}
	reason := fmt.Sprintf("delivered more than max_attempts %d times", c.spec.MaxAttempts)
	args, err := c.tokenArgs(held, reason, false)
	if err != nil {
		return c.fail("dead_letter", err)
	}
	moved, stale, gone, err := c.runBury(ctx, args)
	if err != nil {
		return c.fail("dead_letter", err)
	}
	if moved > 0 {
		c.log.Info("redisstream cursor: dead-lettered entries past max attempts",
			"entries", moved, "max_attempts", c.spec.MaxAttempts, "dead_letter_stream", c.opts.DeadLetterStream)
	}
	if gone {
		return c.fail("dead_letter", fmt.Errorf("%w: %d entries past max attempts are no longer pending: group %q is gone",
			cursor.ErrStaleLease, len(held), c.opts.Group))
	}
	if len(stale) > 0 {
		return c.fail("dead_letter", fmt.Errorf("%w: %d of %d entries past max attempts were claimed again or are no longer pending (e.g. %v)",
			cursor.ErrStaleLease, len(stale), len(held), stale[0]))
	}
	return nil
}

// runBury runs buryScript with args (group, reason, then id, count pairs)
// and returns how many entries it moved and the ids it refused; gone
// reports that the group is gone (see runClaimed): nothing was moved.
// With delete_acked the moved entries leave the stream too, as acked ones
// do: the stream does not grow with the rows that kept failing.
func (c *Cursor) runBury(ctx context.Context, args []any) (moved int64, stale []any, gone bool, err error) {
	del := "0"
	if c.opts.DeleteAcked {
		del = "1"
	}
	args = slices.Insert(args, 2, any(del))
	v, gone, err := c.runClaimed(ctx, buryScript, []string{c.opts.Stream, c.opts.DeadLetterStream, c.errors}, args...)
	if err != nil || gone {
		return 0, nil, gone, err
	}
	reply, ok := v.([]any)
	if !ok || len(reply) != 2 {
		return 0, nil, false, fmt.Errorf("unexpected dead-letter reply %T", v)
	}
	moved, _ = reply[0].(int64)
	stale, _ = reply[1].([]any)
	return moved, stale, false, nil
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

// parseClaim reads claimScript's reply: the entries past max_attempts it
// held to bury, then the entries it claimed to run, all with their lease
// tokens.
func parseClaim(v any) (dead, rows []cursor.Row, err error) {
	top, ok := v.([]any)
	if !ok || len(top) < 2 || len(top) > 3 {
		return nil, nil, fmt.Errorf("unexpected claim reply %T", v)
	}
	if dead, err = parseEntries(top[0]); err != nil {
		return nil, nil, fmt.Errorf("unexpected claim reply: dead %w", err)
	}
	if rows, err = parseEntries(top[1]); err != nil {
		return nil, nil, fmt.Errorf("unexpected claim reply: claimed %w", err)
	}
	return dead, rows, nil
}

// claimMore reads the flag claimScript's reply ends with: its XAUTOCLAIM
// rounds ran out before the end of the pending list after finding dead
// entries (rounds that found none set no flag: a claim that scans from
// the head again would find the same, for ever).
func claimMore(v any) bool {
	top, _ := v.([]any)
	if len(top) != 3 {
		return false
	}
	n, _ := top[2].(int64)
	return n == 1
}

// parseEntries reads a list of {id, deliveries, {field, value, ...}}
// entries, with their lease tokens.
func parseEntries(v any) ([]cursor.Row, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("entries are %T", v)
	}
	rows := make([]cursor.Row, 0, len(list))
	for _, e := range list {
		t, ok := e.([]any)
		if !ok || len(t) != 3 {
			return nil, fmt.Errorf("entry is %T", e)
		}
		id, ok1 := t[0].(string)
		count, ok2 := t[1].(int64)
		fields, ok3 := t[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(fields)%2 != 0 {
			return nil, fmt.Errorf("entry %v", t)
		}
		values := make(map[string]any, len(fields)/2)
		for i := 0; i < len(fields); i += 2 {
			k, _ := fields[i].(string)
			v := fields[i+1]
			if s, ok := v.(string); ok {
				v = fieldText(s)
			}
			values[fieldText(k)] = v
		}
		rows = append(rows, cursor.Row{Key: id, Values: values, Lease: cursor.Lease{Attempt: int(count), Token: Token(id, int(count))}})
	}
	return rows, nil
}

// fieldText is a field name or value as Row.Values holds it: s itself when it
// is valid UTF-8, else its bytes in base64 (standard encoding), as the SQL
// drivers give binary columns. The engine records a claim's rows in its
// log as JSON, which holds only text, and a re-issued frame runs the
// recorded rows: raw bytes would reach the body as they are but be
// recorded, and run again, with U+FFFD in place of every invalid byte.
func fieldText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// Token is the lease token of entry id at its deliveries-th delivery.
func Token(id string, deliveries int) string {
	return id + "#" + strconv.Itoa(deliveries)
}

// parseToken splits a lease token into entry id and delivery count.
func parseToken(tok string) (string, int, error) {
	i := strings.LastIndexByte(tok, '#')
	if i <= 0 {
		return "", 0, fmt.Errorf("malformed lease token %q", tok)
	}
	n, err := strconv.Atoi(tok[i+1:])
	if err != nil || n < 1 {
		return "", 0, fmt.Errorf("malformed lease token %q", tok)
	}
	return tok[:i], n, nil
}

// tokenArgs returns group, extra, then id, count pairs for a fenced
// script; with withErr, id, count, Row.Error triples.
func (c *Cursor) tokenArgs(rows []cursor.Row, extra any, withErr bool) ([]any, error) {
	args := make([]any, 0, 2+3*len(rows))
	args = append(args, c.opts.Group, extra)
	for _, r := range rows {
		id, n, err := parseToken(r.Lease.Token)
		if err != nil {
			return nil, err
		}
		if id != r.Key {
			return nil, fmt.Errorf("lease token %q is not for entry %q", r.Lease.Token, r.Key)
		}
		args = append(args, id, n)
		if withErr {
			args = append(args, r.Error)
		}
	}
	return args, nil
}

// Ack acknowledges rows (XACK), and deletes them with delete_acked. Rows
// redelivered since their token was issued, or no longer pending, are
// left alone and reported with an error wrapping cursor.ErrStaleLease;
// the other rows are acknowledged all the same.
func (c *Cursor) Ack(ctx context.Context, rows []cursor.Row) error {
	del := "0"
	if c.opts.DeleteAcked {
		del = "1"
	}
	return c.fenced(ctx, "ack", ackScript, rows, del, false)
}

// Release hands rows back: the next claim of any consumer reclaims them
// at once, counting another delivery. Stale tokens are refused as in Ack.
// A row's Error (its body's failure) is kept as the entry's last error
// (lastErrorKey), which a dead-letter entry carries as
// cursorflow_last_error.
func (c *Cursor) Release(ctx context.Context, rows []cursor.Row) error {
	return c.fenced(ctx, "release", releaseScript, rows, c.lease.Milliseconds()+1, true)
}

func (c *Cursor) fenced(ctx context.Context, op string, s *redis.Script, rows []cursor.Row, extra any, withErr bool) error {
	if c.closed.Load() {
		return c.fail(op, cursor.ErrClosed)
	}
	if len(rows) == 0 {
		return nil
	}
	args, err := c.tokenArgs(rows, extra, withErr)
	if err != nil {
		return c.fail(op, err)
	}
	v, gone, err := c.runClaimed(ctx, s, []string{c.opts.Stream, c.errors}, args...)
	if err != nil {
		return c.fail(op, err)
	}
	if gone {
		return c.fail(op, fmt.Errorf("%w: %d of %d entries are no longer pending: group %q is gone",
			cursor.ErrStaleLease, len(rows), len(rows), c.opts.Group))
	}
	stale, _ := v.([]any)
	if len(stale) > 0 {
		return c.fail(op, fmt.Errorf("%w: %d of %d entries were redelivered or are no longer pending (e.g. %v)",
			cursor.ErrStaleLease, len(stale), len(rows), stale[0]))
	}
	return nil
}

// DeadLetter copies rows that are still pending to the dead-letter stream
// with reason and acknowledges them. It does not check lease tokens: the
// engine dead-letters rows after its own attempts ran out.
func (c *Cursor) DeadLetter(ctx context.Context, rows []cursor.Row, reason string) error {
	if c.closed.Load() {
		return c.fail("dead_letter", cursor.ErrClosed)
	}
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, 2+2*len(rows))
	args = append(args, c.opts.Group, reason)
	for _, r := range rows {
		args = append(args, r.Key, "") // no count: unfenced
	}
	// No entry is pending in a group that is gone: none to move.
	n, _, _, err := c.runBury(ctx, args)
	if err != nil {
		return c.fail("dead_letter", err)
	}
	c.log.Info("redisstream cursor: dead-lettered entries on request", "entries", n, "dead_letter_stream", c.opts.DeadLetterStream)
	return nil
}

// Close ends the cursor; later calls fail with cursor.ErrClosed. The
// driver's client stays open, and entries the cursor claimed stay with
// its consumer until acknowledged or their lease runs out.
func (c *Cursor) Close() error {
	c.closed.Store(true)
	return nil
}
