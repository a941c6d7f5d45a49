package natsconsumer

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/internal/clientcache"
	"github.com/cursorflow/cursorflow/internal/jsonnum"
)

// Defaults of Config and Spec.
const (
	// DefaultLease is the consumer's AckWait when the Spec names no lease.
	DefaultLease = time.Minute
	// DefaultReconnectWait is the pause between reconnect attempts.
	DefaultReconnectWait = 250 * time.Millisecond
	// DefaultAckTimeout bounds the wait for the server to confirm an ack,
	// nak or term.
	DefaultAckTimeout = 10 * time.Second
	// ackConcurrency bounds the acknowledgements in flight per call.
	ackConcurrency = 64
	// maxEmptyRetries is how often an empty fetch is retried while the
	// consumer still reports undelivered messages.
	maxEmptyRetries = 3
	// maxDeadLetterRounds bounds the fetches of one Claim that returned
	// only dead-lettered messages.
	maxDeadLetterRounds = 100
)

// Headers set on dead-lettered messages (the original headers are kept).
const (
	HeaderStream     = "Cursorflow-Stream"
	HeaderConsumer   = "Cursorflow-Consumer"
	HeaderSequence   = "Cursorflow-Sequence"
	HeaderSubject    = "Cursorflow-Subject"
	HeaderDeliveries = "Cursorflow-Deliveries"
	HeaderReason     = "Cursorflow-Reason"
)

// Config configures a Driver.
type Config struct {
	// NATSOptions are applied to every connection after the driver's own
	// (name, endless reconnects, ReconnectWait), e.g. nats.UserCredentials
	// for credentials that do not fit in a URL. Optional.
	NATSOptions []nats.Option
	// ReconnectWait is the pause between reconnect attempts. Defaults to
	// DefaultReconnectWait (250ms).
	ReconnectWait time.Duration
	// AckTimeout bounds the wait for the server's confirmation of an ack,
	// nak or term. Defaults to DefaultAckTimeout (10s).
	AckTimeout time.Duration
	// Logger receives dead-letter notices and option warnings when a Spec
	// carries no logger of its own. Defaults to slog.Default().
	Logger *slog.Logger
}

// Driver is the NATS JetStream cursor driver (nats.go jetstream package):
// every loop claims from a durable pull consumer. It keeps one connection
// per credential and one consumer handle per stream and consumer; Open is
// cheap. Safe for concurrent use.
type Driver struct {
	cfg       Config
	log       *slog.Logger
	conns     *clientcache.Cache[*conn]
	mu        sync.Mutex
	consumers map[string]*consumerEntry
}

type conn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

type consumerEntry struct {
	c     jetstream.Consumer
	lease time.Duration
}

var _ cursor.Driver = (*Driver)(nil)

// New returns a driver. Connections are made lazily, by the first Open
// of each credential.
func New(cfg Config) *Driver {
	if cfg.ReconnectWait <= 0 {
		cfg.ReconnectWait = DefaultReconnectWait
	}
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = DefaultAckTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Driver{cfg: cfg, log: log, conns: clientcache.New(func(c *conn) error {
		c.nc.Close()
		return nil
	}), consumers: make(map[string]*consumerEntry)}
}

// OptionKeys lists the options the driver reads (cursor.OptionKeyLister).
func (d *Driver) OptionKeys() []string {
	return []string{OptStream, OptConsumer, OptDurable, OptSubject, OptDeadLetterSubject, OptURL}
}

// Features reports what the driver guarantees: batch claims, redelivery
// after AckWait (the lease), explicit acks, delivery counts as attempts
// and a dead letter. JetStream accepts an ack from a holder whose
// delivery was since redelivered to someone else, so there is no
// fencing; and redeliveries are interleaved with new messages, so there
// is no strict order.
func (d *Driver) Features() cursor.Features {
	return cursor.Features{
		BatchClaim:  true,
		LeaseExpiry: true,
		NeedsAck:    true,
		DeadLetter:  true,
		Attempts:    true,
	}
}

// Open returns a cursor on the durable pull consumer that spec.Options
// names, on the server that spec.Credential (a nats:// URL, several
// separated by commas) names. It creates the consumer when it does not
// exist (explicit acks, AckWait = Spec.Lease, no delivery limit: the
// driver counts deliveries itself) and sets AckWait on one it binds to.
func (d *Driver) Open(ctx context.Context, spec cursor.Spec) (cursor.Cursor, error) {
	log := spec.Logger
	if log == nil {
		log = d.log
	}
	log = log.With("cursor", spec.Kind, "auth", spec.Auth, "loop_id", spec.LoopID, "slot", spec.SlotID)
	c := &Cursor{spec: spec, log: log, ackTimeout: d.cfg.AckTimeout}
	opts, err := ParseOptions(spec.Options, log)
	if err != nil {
		return nil, c.fail("open", err)
	}
	if opts.Consumer == "" {
		if spec.LoopID == "" {
			return nil, c.fail("open", fmt.Errorf("option %q is required when the spec has no loop id", OptConsumer))
		}
		opts.Consumer = ConsumerName(spec.LoopID)
	}
	c.opts = opts
	lease := spec.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	cn, err := d.conn(spec.Credential)
	if err != nil {
		return nil, c.fail("open", err)
	}
	c.conn = cn
	c.consumer = func(ctx context.Context, refresh bool) (jetstream.Consumer, error) {
		return d.consumer(ctx, cn, spec.Credential, opts, lease, refresh, log)
	}
	if _, err := c.consumer(ctx, false); err != nil {
		return nil, c.fail("open", err)
	}
	return c, nil
}

var _ cursor.Finisher = (*Driver)(nil)

// Finish deletes the durable consumer the driver named for spec's loop run
// (ConsumerName of the loop id), so that the server stops keeping its
// state, once the engine says the run is over for good (see
// cursor.Finisher). A consumer the cursor block names is left alone, as
// is a spec without a loop id; a consumer or stream that no longer exists
// is not an error.
func (d *Driver) Finish(ctx context.Context, spec cursor.Spec) error {
	opts, err := ParseOptions(spec.Options, nil)
	if err != nil {
		return &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "finish", Err: err}
	}
	if opts.Consumer != "" || spec.LoopID == "" {
		return nil
	}
	opts.Consumer = ConsumerName(spec.LoopID)
	cn, err := d.conn(spec.Credential)
	if err != nil {
		return &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "finish", Err: err}
	}
	d.mu.Lock()
	delete(d.consumers, spec.Credential+"\x00"+opts.Stream+"\x00"+opts.Consumer)
	d.mu.Unlock()
	err = cn.js.DeleteConsumer(ctx, opts.Stream, opts.Consumer)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "finish",
			Err: fmt.Errorf("delete consumer %q on stream %q: %w", opts.Consumer, opts.Stream, err)}
	}
	return nil
}

func (d *Driver) conn(credential string) (*conn, error) {
	return d.conns.Get(credential, func() (*conn, error) { return d.connect(credential) })
}

func (d *Driver) connect(credential string) (*conn, error) {
	if strings.TrimSpace(credential) == "" {
		return nil, errors.New("empty credential: want a nats:// URL")
	}
	opts := append([]nats.Option{
		nats.Name("cursorflow"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(d.cfg.ReconnectWait),
		nats.RetryOnFailedConnect(false),
	}, d.cfg.NATSOptions...)
	nc, err := nats.Connect(credential, opts...)
	if err != nil {
		// Connect errors may quote the URL, password and all.
		switch {
		case errors.Is(err, nats.ErrNoServers):
			// Down, restarting or not listening yet: a failure that may
			// pass, which the engine tries again (cursor.Transient).
			return nil, cursor.MarkTransient(errors.New("no NATS server available at the credential's address"))
		case errors.Is(err, nats.ErrAuthorization):
			return nil, errors.New("authorization violation")
		default:
			return nil, errors.New("cannot connect to the credential's NATS server")
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &conn{nc: nc, js: js}, nil
}

// consumer returns the cached consumer handle, or binds to (and sets
// AckWait on) or creates the durable consumer.
func (d *Driver) consumer(ctx context.Context, cn *conn, credential string, opts Options, lease time.Duration, refresh bool, log *slog.Logger) (jetstream.Consumer, error) {
	key := credential + "\x00" + opts.Stream + "\x00" + opts.Consumer
	d.mu.Lock()
	if d.conns.Closed() {
		d.mu.Unlock()
		return nil, cursor.ErrClosed
	}
	e, ok := d.consumers[key]
	d.mu.Unlock()
	if ok && !refresh && e.lease == lease {
		return e.c, nil
	}
	c, err := cn.js.Consumer(ctx, opts.Stream, opts.Consumer)
	switch {
	case err == nil:
		cfg := c.CachedInfo().Config
		if cfg.AckPolicy != jetstream.AckExplicitPolicy {
			return nil, fmt.Errorf("consumer %q on stream %q has ack policy %v, want explicit", opts.Consumer, opts.Stream, cfg.AckPolicy)
		}
		if opts.Subject != "" && cfg.FilterSubject != opts.Subject {
			log.Warn("natsconsumer cursor: the existing consumer has another filter subject; using it as it is",
				"consumer", opts.Consumer, "filter_subject", cfg.FilterSubject, "subject", opts.Subject)
		}
		if cfg.AckWait != lease {
			cfg.AckWait = lease
			if c, err = cn.js.UpdateConsumer(ctx, opts.Stream, cfg); err != nil {
				return nil, fmt.Errorf("set AckWait of consumer %q on stream %q: %w", opts.Consumer, opts.Stream, err)
			}
		}
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		c, err = cn.js.CreateOrUpdateConsumer(ctx, opts.Stream, jetstream.ConsumerConfig{
			Durable:       opts.Consumer,
			FilterSubject: opts.Subject,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       lease,
			MaxDeliver:    -1,
			MaxAckPending: -1,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err != nil {
			return nil, fmt.Errorf("create consumer %q on stream %q: %w", opts.Consumer, opts.Stream, err)
		}
	default:
		return nil, fmt.Errorf("consumer %q on stream %q: %w", opts.Consumer, opts.Stream, err)
	}
	d.mu.Lock()
	// Close marks the cache closed before it clears consumers (under
	// d.mu), so no entry is stored after the clearing.
	if !d.conns.Closed() {
		d.consumers[key] = &consumerEntry{c: c, lease: lease}
	}
	d.mu.Unlock()
	return c, nil
}

// Close closes every connection. Cursors opened earlier fail afterwards.
func (d *Driver) Close() error {
	err := d.conns.Close()
	d.mu.Lock()
	d.consumers = make(map[string]*consumerEntry)
	d.mu.Unlock()
	return err
}

// Cursor claims messages of one durable pull consumer. It is a
// cursor.Cursor and a cursor.DeadLetterer. Acks, naks and terms go to the
// messages' reply subjects, which travel in the lease tokens, so any
// cursor of the same credential can complete a row another one claimed
// (the engine re-runs a frame from its log on a fresh cursor).
type Cursor struct {
	spec       cursor.Spec
	opts       Options
	conn       *conn
	consumer   func(ctx context.Context, refresh bool) (jetstream.Consumer, error)
	ackTimeout time.Duration
	log        *slog.Logger
	closed     atomic.Bool
}

var (
	_ cursor.Cursor       = (*Cursor)(nil)
	_ cursor.DeadLetterer = (*Cursor)(nil)
)

func (c *Cursor) fail(op string, err error) error {
	return &cursor.ClaimError{Kind: c.spec.Kind, Auth: c.spec.Auth, Op: op, Err: err}
}

// Claim fetches up to max messages (see claim) and returns them as a
// claim held by their AckWait from the start: Abort naks them for
// immediate redelivery, and the messages of a claimer that died come back
// when their AckWait runs out. Messages delivered more than
// Spec.MaxAttempts times are in the claim's Dead, whether or not it
// returns rows, held like the rows: Commit (once the engine recorded them
// dead) publishes them to the dead-letter subject and terminates them;
// Abort, or a claimer that dies, leaves them for a later claim to list
// dead again.
func (c *Cursor) Claim(ctx context.Context, max int) (*cursor.Claim, error) {
	rows, dead, err := c.claim(ctx, max)
	if err != nil {
		return nil, err
	}
	deadRows := make([]cursor.Row, 0, len(dead))
	for _, d := range dead {
		deadRows = append(deadRows, d.row)
	}
	reason := fmt.Sprintf("delivered more than max_attempts %d times", c.spec.MaxAttempts)
	commit := func(ctx context.Context) error {
		if len(dead) == 0 {
			return nil
		}
		buried, err := c.bury(ctx, dead, reason)
		if err != nil {
			// Those not buried come back after AckWait and are listed dead
			// again: reported twice, never unreported.
			return c.fail("dead_letter", fmt.Errorf("%d of %d messages past max attempts: %w", len(dead)-len(buried), len(dead), err))
		}
		c.log.Info("natsconsumer cursor: dead-lettered messages past max attempts",
			"messages", len(dead), "max_attempts", c.spec.MaxAttempts)
		return nil
	}
	abort := func(ctx context.Context) error {
		var errs []error
		if len(rows) > 0 {
			errs = append(errs, c.Release(ctx, rows))
		}
		for _, d := range dead {
			errs = append(errs, c.reply(ctx, d.reply, "-NAK"))
		}
		return errors.Join(errs...)
	}
	claim := cursor.NewClaim(rows, commit, abort)
	claim.Dead = deadRows
	return claim, nil
}

// deadMsg is a message a claim holds past Spec.MaxAttempts, to bury on
// Commit.
type deadMsg struct {
	row     cursor.Row
	subject string
	data    []byte
	header  nats.Header
	reply   string
	seq     uint64
	// delivered is how many times the consumer delivered it.
	delivered uint64
}

// claim fetches up to max messages without waiting (a no-wait pull).
// Messages delivered more than Spec.MaxAttempts times are returned apart
// (dead), held under their AckWait like the rows, for Claim's Commit to
// bury; a fetch of only such messages is followed by another. Zero rows
// means the consumer has nothing to deliver: no new message and none
// whose AckWait ran out.
func (c *Cursor) claim(ctx context.Context, max int) (rows []cursor.Row, dead []deadMsg, err error) {
	if c.closed.Load() {
		return nil, nil, c.fail("claim", cursor.ErrClosed)
	}
	if max < 1 {
		return nil, nil, c.fail("claim", fmt.Errorf("max rows %d, want at least 1", max))
	}
	// On an error, the messages held so far come back after AckWait.
	empty := 0
	for round := 0; ; round++ {
		start := time.Now()
		msgs, err := c.fetch(ctx, max)
		if err != nil {
			return nil, nil, c.fail("claim", err)
		}
		if len(msgs) == 0 {
			more, err := c.undelivered(ctx)
			if err != nil {
				return nil, nil, c.fail("claim", err)
			}
			if more == 0 {
				return nil, dead, nil
			}
			if empty++; empty > maxEmptyRetries {
				c.log.Warn("natsconsumer cursor: the consumer reports undelivered messages but delivers none; is its max_ack_pending reached?",
					"consumer", c.opts.Consumer, "undelivered", more)
				return nil, dead, nil
			}
			continue
		}
		live, exhausted, err := c.rows(msgs, start)
		if err != nil {
			return nil, nil, c.fail("claim", err)
		}
		for _, m := range exhausted {
			md, err := m.Metadata()
			if err != nil {
				return nil, nil, c.fail("claim", err)
			}
			dead = append(dead, deadMsg{row: rowOf(m, md), subject: m.Subject(), data: m.Data(), header: m.Headers(),
				reply: m.Reply(), seq: md.Sequence.Stream, delivered: md.NumDelivered})
		}
		if len(live) > 0 {
			return live, dead, nil
		}
		if round+1 >= maxDeadLetterRounds {
			return nil, nil, c.fail("claim", fmt.Errorf("%d fetches in a row returned only messages past max attempts", maxDeadLetterRounds))
		}
	}
}

// fetch pulls up to max messages without waiting, re-binding the
// consumer once if it vanished.
func (c *Cursor) fetch(ctx context.Context, max int) ([]jetstream.Msg, error) {
	for attempt := 0; ; attempt++ {
		cons, err := c.consumer(ctx, attempt > 0)
		if err != nil {
			return nil, err
		}
		msgs, err := fetchNoWait(ctx, cons, max)
		if err != nil && attempt == 0 && (errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted)) {
			continue
		}
		return msgs, err
	}
}

func fetchNoWait(ctx context.Context, cons jetstream.Consumer, max int) ([]jetstream.Msg, error) {
	batch, err := cons.FetchNoWait(max)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	var msgs []jetstream.Msg
	for {
		select {
		case m, ok := <-batch.Messages():
			if !ok {
				if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
					// Delivered messages come back after AckWait.
					return nil, fmt.Errorf("fetch: %w", err)
				}
				return msgs, nil
			}
			msgs = append(msgs, m)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// undelivered returns how many messages the consumer has not delivered
// yet.
func (c *Cursor) undelivered(ctx context.Context) (uint64, error) {
	cons, err := c.consumer(ctx, false)
	if err != nil {
		return 0, err
	}
	info, err := cons.Info(ctx)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		// Deleted behind the driver's back: create it again, and say
		// there is more, so the claim fetches once more.
		if _, err := c.consumer(ctx, true); err != nil {
			return 0, err
		}
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("consumer info: %w", err)
	}
	return info.NumPending, nil
}

// rows turns messages into rows and splits off those past MaxAttempts.
func (c *Cursor) rows(msgs []jetstream.Msg, start time.Time) (live []cursor.Row, dead []jetstream.Msg, err error) {
	deadline := start.Add(c.leaseOf())
	for _, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			return nil, nil, err
		}
		if c.spec.MaxAttempts > 0 && md.NumDelivered > uint64(c.spec.MaxAttempts) {
			dead = append(dead, m)
			continue
		}
		r := rowOf(m, md)
		r.Lease.Deadline, r.Lease.Token = deadline, m.Reply()
		live = append(live, r)
	}
	return live, dead, nil
}

// rowOf is the row of message m, without a lease: key, values (with the
// message's headers, see withHeaders) and the delivery count.
func rowOf(m jetstream.Msg, md *jetstream.MsgMetadata) cursor.Row {
	return cursor.Row{
		Key:    strconv.FormatUint(md.Sequence.Stream, 10),
		Values: withHeaders(Values(m.Data()), m.Headers()),
		Lease:  cursor.Lease{Attempt: int(min(md.NumDelivered, math.MaxInt32))},
	}
}

// withHeaders adds hdr to values under "headers" as {name: value}: a
// name's values joined with ", " (as an HTTP field's are combined, and as
// the nats tool's js_get_msg gives them), so that a body reads every
// header the same way, a string, however many times it was set. Names
// keep their case (NATS headers are case-sensitive). Text that is not
// UTF-8 has U+FFFD in place of its bad bytes here rather than when the
// log records the row, so a frame re-run from the log sees what the first
// run saw. A message without headers gets no "headers" value, and a JSON
// payload with a "headers" field of its own keeps it: the payload's
// fields are what a body read before headers were given, and they win.
func withHeaders(values map[string]any, hdr nats.Header) map[string]any {
	if len(hdr) == 0 {
		return values
	}
	if _, taken := values["headers"]; taken {
		return values
	}
	h := make(map[string]any, len(hdr))
	for name, vs := range hdr {
		h[strings.ToValidUTF8(name, "\uFFFD")] = strings.ToValidUTF8(strings.Join(vs, ", "), "\uFFFD")
	}
	values["headers"] = h
	return values
}

func (c *Cursor) leaseOf() time.Duration {
	if c.spec.Lease > 0 {
		return c.spec.Lease
	}
	return DefaultLease
}

// Values turns a message payload into row values: a JSON object's fields
// (integers as int64, or their exact decimal text past int64; other
// numbers float64), or else
// {"data": payload as text}. A payload that is not valid UTF-8 is
// {"data": payload in base64 (standard encoding), "data_base64": true},
// whatever its shape: the engine's log holds only text, and a JSON object
// holding invalid UTF-8 would decode with U+FFFD in its place.
func Values(data []byte) map[string]any {
	if !utf8.Valid(data) {
		return map[string]any{"data": base64.StdEncoding.EncodeToString(data), "data_base64": true}
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		if v, err := jsonnum.Decode(trimmed); err == nil {
			if m, ok := v.(map[string]any); ok {
				return m
			}
		}
	}
	return map[string]any{"data": string(data)}
}

// bury publishes messages to the dead-letter subject (if any) and
// terminates them. It returns the rows of the messages it terminated: a
// message whose publish or term failed comes back after AckWait and is
// listed dead again then.
func (c *Cursor) bury(ctx context.Context, msgs []deadMsg, reason string) ([]cursor.Row, error) {
	var (
		errs   []error
		buried []cursor.Row
	)
	for _, m := range msgs {
		if err := c.publishDead(ctx, m.subject, m.data, m.header, m.seq, m.delivered, reason); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.reply(ctx, m.reply, "+TERM"); err != nil {
			errs = append(errs, err)
			continue
		}
		buried = append(buried, m.row)
	}
	return buried, errors.Join(errs...)
}

func (c *Cursor) publishDead(ctx context.Context, subject string, data []byte, hdr nats.Header, seq, deliveries uint64, reason string) error {
	if c.opts.DeadLetterSubject == "" {
		return nil
	}
	h := nats.Header{}
	for k, v := range hdr {
		if strings.HasPrefix(k, "Nats-") {
			// Nats-Msg-Id and friends would make the dead-letter
			// stream deduplicate or reject the copy.
			continue
		}
		h[k] = append([]string(nil), v...)
	}
	h.Set(HeaderStream, c.opts.Stream)
	h.Set(HeaderConsumer, c.opts.Consumer)
	h.Set(HeaderSequence, strconv.FormatUint(seq, 10))
	h.Set(HeaderSubject, subject)
	h.Set(HeaderDeliveries, strconv.FormatUint(deliveries, 10))
	h.Set(HeaderReason, reason)
	if _, err := c.conn.js.PublishMsg(ctx, &nats.Msg{Subject: c.opts.DeadLetterSubject, Data: data, Header: h}); err != nil {
		return fmt.Errorf("publish to dead-letter subject %q: %w", c.opts.DeadLetterSubject, err)
	}
	return nil
}

// Ack acknowledges rows (+ACK to each message's reply subject) and waits
// for the server to confirm.
func (c *Cursor) Ack(ctx context.Context, rows []cursor.Row) error {
	return c.replyAll(ctx, "ack", rows, "+ACK")
}

// Release hands rows back for immediate redelivery (-NAK).
func (c *Cursor) Release(ctx context.Context, rows []cursor.Row) error {
	return c.replyAll(ctx, "release", rows, "-NAK")
}

// DeadLetter publishes rows (their stored messages, fetched by stream
// sequence) to the dead-letter subject, if one is configured, and
// terminates them (+TERM), so the consumer never delivers them again.
func (c *Cursor) DeadLetter(ctx context.Context, rows []cursor.Row, reason string) error {
	if c.closed.Load() {
		return c.fail("dead_letter", cursor.ErrClosed)
	}
	if len(rows) == 0 {
		return nil
	}
	if c.opts.DeadLetterSubject != "" {
		stream, err := c.conn.js.Stream(ctx, c.opts.Stream)
		if err != nil {
			return c.fail("dead_letter", fmt.Errorf("stream %q: %w", c.opts.Stream, err))
		}
		for _, r := range rows {
			seq, err := strconv.ParseUint(r.Key, 10, 64)
			if err != nil {
				return c.fail("dead_letter", fmt.Errorf("row key %q is not a stream sequence", r.Key))
			}
			var subject string
			var data []byte
			var hdr nats.Header
			if m, err := stream.GetMsg(ctx, seq); err == nil {
				subject, data, hdr = m.Subject, m.Data, m.Header
			} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
				return c.fail("dead_letter", fmt.Errorf("get message %d: %w", seq, err))
			}
			if err := c.publishDead(ctx, subject, data, hdr, seq, uint64(max(r.Lease.Attempt, 0)), reason); err != nil {
				return c.fail("dead_letter", err)
			}
		}
	}
	return c.replyAll(ctx, "dead_letter", rows, "+TERM")
}

// replyAll sends body to every row's reply subject, a bounded number at
// a time, and waits for the server's confirmations.
func (c *Cursor) replyAll(ctx context.Context, op string, rows []cursor.Row, body string) error {
	if c.closed.Load() {
		return c.fail(op, cursor.ErrClosed)
	}
	for _, r := range rows {
		if !strings.HasPrefix(r.Lease.Token, "$JS.ACK.") {
			return c.fail(op, fmt.Errorf("row %q: lease token %q is not a JetStream reply subject", r.Key, r.Lease.Token))
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, ackConcurrency)
	)
	for _, r := range rows {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := c.reply(ctx, r.Lease.Token, body); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("row %s: %w", r.Key, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return c.fail(op, errors.Join(errs...))
	}
	return nil
}

// reply sends an acknowledgement and waits for the server's confirmation.
func (c *Cursor) reply(ctx context.Context, subject, body string) error {
	ctx, cancel := context.WithTimeout(ctx, c.ackTimeout)
	defer cancel()
	if _, err := c.conn.nc.RequestWithContext(ctx, subject, []byte(body)); err != nil {
		return fmt.Errorf("%s: %w", body, err)
	}
	return nil
}

// Close ends the cursor; later calls fail with cursor.ErrClosed. The
// driver's connection stays open; messages the cursor claimed and did not
// acknowledge come back after AckWait.
func (c *Cursor) Close() error {
	c.closed.Store(true)
	return nil
}
