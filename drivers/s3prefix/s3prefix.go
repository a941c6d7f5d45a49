package s3prefix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/memblob" // mem:// buckets, the embedded case
	_ "gocloud.dev/blob/s3blob"  // s3:// buckets

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/internal/clientcache"
	"github.com/cursorflow/cursorflow/internal/s3bucket"
)

// Defaults of Config and of a cursor's lease.
const (
	// DefaultConcurrency is how many requests one Claim, Ack or Release
	// has in flight at once.
	DefaultConcurrency = 16
	// DefaultLease is the lease taken when Spec.Lease is zero.
	DefaultLease = time.Minute
	// DefaultResponseHeaderTimeout is Config.ResponseHeaderTimeout's
	// default (30s).
	DefaultResponseHeaderTimeout = s3bucket.DefaultResponseHeaderTimeout
	// maxStateCache bounds the cache of marker bodies per bucket; it is
	// emptied when full.
	maxStateCache = 200_000
)

// ErrRacyBucket is returned by Open for a bucket whose conditional writes
// cannot arbitrate concurrent claimers (file://, gocloud's fileblob),
// unless Config.AllowFileBlob is set.
var ErrRacyBucket = errors.New("s3prefix: bucket cannot arbitrate concurrent claimers")

// Config configures a Driver.
type Config struct {
	// OpenBucket opens the bucket a credential URL names. Defaults to
	// blob.OpenBucket, which knows s3:// and mem:// (this package imports
	// s3blob and memblob) plus whatever other gocloud drivers the host
	// imports. A host that fills a memblob bucket itself returns that
	// bucket here. The driver closes the buckets it opened on Close.
	OpenBucket func(ctx context.Context, url string) (*blob.Bucket, error)
	// ResponseHeaderTimeout bounds how long a request to an s3:// bucket
	// opened by the default OpenBucket waits for the response's headers,
	// so a server that accepts connections and never answers fails the
	// claim (a transient failure the engine retries) instead of hanging
	// it. The transfer of a body is not bounded. Defaults to
	// DefaultResponseHeaderTimeout; a host's own OpenBucket is not
	// affected.
	ResponseHeaderTimeout time.Duration
	// Concurrency is how many requests one Claim, Ack or Release has in
	// flight at once. Defaults to DefaultConcurrency (16).
	Concurrency int
	// AllowFileBlob lets file:// buckets through. fileblob honours
	// IfNotExist racily (two writers can both create the same marker),
	// so it is safe with one claimer at a time only. Defaults to false.
	AllowFileBlob bool
	// Logger receives option warnings and dead-letter reasons when a Spec
	// carries no logger of its own. Defaults to slog.Default().
	Logger *slog.Logger
}

// Driver is the s3prefix cursor driver. It keeps one bucket handle per
// credential URL, so Open is cheap; of those no open cursor holds, it
// keeps the 16 most recently used and closes the others (a url option may
// name a bucket per execution). Safe for concurrent use.
type Driver struct {
	cfg     Config
	log     *slog.Logger
	buckets *clientcache.Cache[*bucket]
}

var _ cursor.Driver = (*Driver)(nil)

// bucket is an open bucket plus the bodies of the markers seen in it.
// Markers are immutable, so a body read once stays valid as long as the
// object (same key, modification time and size) exists.
type bucket struct {
	b      *blob.Bucket
	s3     *s3.Client // set for s3blob buckets: batch deletes
	name   string     // the S3 bucket's name
	mu     sync.Mutex
	states map[string]marker
}

func (b *bucket) cached(id string) (marker, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := b.states[id]
	return m, ok
}

func (b *bucket) remember(id string, m marker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.states) >= maxStateCache {
		clear(b.states)
	}
	b.states[id] = m
}

// New returns a driver. Buckets are opened lazily, by the first Open of
// each credential.
func New(cfg Config) *Driver {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.ResponseHeaderTimeout <= 0 {
		cfg.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if cfg.OpenBucket == nil {
		cfg.OpenBucket = defaultOpenBucket(cfg.ResponseHeaderTimeout)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Driver{cfg: cfg, log: log, buckets: clientcache.New(func(b *bucket) error { return b.b.Close() })}
}

// OptionKeys lists the options the driver reads (cursor.OptionKeyLister).
func (d *Driver) OptionKeys() []string { return slices.Sorted(maps.Keys(knownOptions)) }

// Features reports what the driver guarantees: batch claims, leases that
// expire on their own, acknowledgement by moving the object, dead
// letters, fenced tokens and delivery counts. Claims are not ordered:
// concurrent claimers start at different points of the listing.
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

// Open returns a cursor over the bucket that spec.Credential names (a
// gocloud URL; the engine fills it from the cursor block's auth alias or
// its url option) and the prefixes of spec.Options.
func (d *Driver) Open(ctx context.Context, spec cursor.Spec) (cursor.Cursor, error) {
	fail := func(err error) error {
		return &cursor.ClaimError{Kind: spec.Kind, Auth: spec.Auth, Op: "open", Err: err}
	}
	log := spec.Logger
	if log == nil {
		log = d.log
	}
	opts, err := ParseOptions(spec.Options, log)
	if err != nil {
		return nil, fail(err)
	}
	cred := spec.Credential
	if cred == "" {
		if u, ok := spec.Options[OptURL].(string); ok {
			cred = u
		}
	}
	b, release, err := d.bucket(ctx, cred)
	if err != nil {
		return nil, fail(err)
	}
	lease := spec.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	return &Cursor{
		spec:    spec,
		opts:    opts,
		b:       b,
		release: release,
		lease:   lease,
		conc:    d.cfg.Concurrency,
		log:     log.With("cursor", spec.Kind, "auth", spec.Auth, "loop_id", spec.LoopID, "slot", spec.SlotID),
	}, nil
}

// bucket returns the bucket at rawURL and the release its cursor calls
// when it closes. A url option may name a bucket per execution, so the
// buckets no cursor holds are closed past clientcache.MaxIdle of them.
func (d *Driver) bucket(ctx context.Context, rawURL string) (*bucket, func(), error) {
	return d.buckets.Acquire(rawURL, func() (*bucket, error) { return d.openBucket(ctx, rawURL) })
}

func (d *Driver) openBucket(ctx context.Context, rawURL string) (*bucket, error) {
	if rawURL == "" {
		return nil, errors.New("no bucket URL: give the cursor an auth credential or a url option")
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		// The parse error quotes the URL; say only what is wrong.
		return nil, errors.New("the bucket URL is not a valid gocloud URL (scheme://bucket?...)")
	}
	if u.Scheme == "file" && !d.cfg.AllowFileBlob {
		return nil, fmt.Errorf("%w: file:// (fileblob's IfNotExist is racy; set Config.AllowFileBlob for a single claimer)", ErrRacyBucket)
	}
	bb, err := d.cfg.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("open %s:// bucket: %w", u.Scheme, err)
	}
	b := &bucket{b: bb, states: make(map[string]marker)}
	var cli *s3.Client
	if u.Scheme == "s3" && bb.As(&cli) {
		b.s3, b.name = cli, u.Host
	}
	return b, nil
}

// defaultOpenBucket opens s3:// buckets with an HTTP client that waits at
// most headerTimeout for a response's headers, and any other URL with
// blob.OpenBucket.
func defaultOpenBucket(headerTimeout time.Duration) func(context.Context, string) (*blob.Bucket, error) {
	return func(ctx context.Context, rawURL string) (*blob.Bucket, error) {
		u, err := url.Parse(rawURL)
		if err == nil && strings.EqualFold(u.Scheme, "s3") {
			return s3bucket.Open(ctx, u, headerTimeout)
		}
		return blob.OpenBucket(ctx, rawURL)
	}
}

// Close closes every bucket the driver opened. Cursors opened earlier
// fail afterwards.
func (d *Driver) Close() error { return d.buckets.Close() }
