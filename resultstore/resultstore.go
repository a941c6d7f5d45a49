package resultstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Defaults of Config.
const (
	// DefaultThreshold is the size above which a value is stored: 64 KiB,
	// NoETL's inline_max_bytes.
	DefaultThreshold = 64 << 10
	// DefaultPrefix is the key prefix of stored results in the bucket.
	DefaultPrefix = "results/"
)

// MarkerKey is the one key of a reference's JSON form (see Ref.Marker).
const MarkerKey = "$result_ref"

// Errors a Store returns (wrapped).
var (
	// ErrNotFound: the referenced object is not in the bucket.
	ErrNotFound = errors.New("resultstore: stored result not found")
	// ErrCorrupt: the object's size or SHA-256 differs from the reference.
	ErrCorrupt = errors.New("resultstore: stored result does not match its reference")
	// ErrForeign: the reference names an object outside this store.
	ErrForeign = errors.New("resultstore: reference is not in this store")
	// ErrConfig: the Config is invalid; the message names the field.
	ErrConfig = errors.New("resultstore: invalid configuration")
)

// Ref points at a stored value: where it is, how many bytes its JSON
// encoding has and its SHA-256 (hex).
type Ref struct {
	URI    string `json:"uri"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Marker returns the reference as the JSON value that stands for the
// stored value in events and commands: {"$result_ref": {uri, size,
// sha256}}.
func (r Ref) Marker() map[string]any {
	return map[string]any{MarkerKey: map[string]any{"uri": r.URI, "size": r.Size, "sha256": r.SHA256}}
}

// RefOf reports whether v is a reference's marker (as Marker builds it,
// or as it decodes from JSON) and returns the reference.
func RefOf(v any) (Ref, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return Ref{}, false
	}
	inner, ok := m[MarkerKey].(map[string]any)
	if !ok || len(inner) != 3 {
		return Ref{}, false
	}
	uri, ok1 := inner["uri"].(string)
	sum, ok2 := inner["sha256"].(string)
	size, ok3 := toInt64(inner["size"])
	if !ok1 || !ok2 || !ok3 || uri == "" || len(sum) != sha256.Size*2 || size < 0 {
		return Ref{}, false
	}
	return Ref{URI: uri, Size: size, SHA256: sum}, true
}

func toInt64(x any) (int64, bool) {
	switch n := x.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}

// HasRef reports whether v (a decoded JSON value: maps, slices, scalars)
// holds a reference anywhere inside.
func HasRef(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		if _, ok := RefOf(t); ok {
			return true
		}
		for _, x := range t {
			if HasRef(x) {
				return true
			}
		}
	case []any:
		for _, x := range t {
			if HasRef(x) {
				return true
			}
		}
	}
	return false
}

// Config configures a Store.
type Config struct {
	// Bucket holds the stored results. Required. Close closes it.
	Bucket *blob.Bucket
	// URL is the bucket's URL (as blob.OpenBucket takes it); references
	// name objects by it, without its query: s3://bucket/<key>,
	// file:///dir/<key>, mem:///<key>. Required.
	URL string
	// Prefix is prepended to every key. Defaults to DefaultPrefix
	// ("results/").
	Prefix string
	// Threshold is the size in bytes of a value's JSON encoding above
	// which the engine stores it. Defaults to DefaultThreshold (64 KiB).
	Threshold int64
}

// Store reads and writes stored results in one bucket. It is safe for
// concurrent use.
type Store struct {
	b         *blob.Bucket
	base      string // URI of key "" (with the prefix)
	prefix    string
	threshold int64
	scheme    string
}

// New returns a Store over cfg.Bucket.
func New(cfg Config) (*Store, error) {
	if cfg.Bucket == nil {
		return nil, fmt.Errorf("%w: Config.Bucket is required", ErrConfig)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("%w: Config.URL is not a bucket URL (scheme://bucket)", ErrConfig)
	}
	if cfg.Threshold < 0 {
		return nil, fmt.Errorf("%w: Config.Threshold must not be negative", ErrConfig)
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultThreshold
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	cfg.Prefix = strings.TrimPrefix(cfg.Prefix, "/")
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	base := u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/") + "/" + cfg.Prefix
	return &Store{b: cfg.Bucket, base: base, prefix: cfg.Prefix, threshold: cfg.Threshold, scheme: u.Scheme}, nil
}

// Threshold returns the size above which a value is stored.
func (s *Store) Threshold() int64 { return s.threshold }

// Base returns the URI every reference of this store starts with.
func (s *Store) Base() string { return s.base }

// Close closes the bucket.
func (s *Store) Close() error { return s.b.Close() }

// Owns reports whether ref names an object of this store.
func (s *Store) Owns(ref Ref) bool {
	key, ok := strings.CutPrefix(ref.URI, s.base)
	if !ok || key == "" {
		return false
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// Put writes data (a JSON document) under name and returns its reference.
// The object's key is <prefix><name>/<sha256>.json: the same data under
// the same name always gives the same key, so a retried Put rewrites the
// same object with the same bytes. name is a slash-separated path (for
// example "<execution id>/<command id>"); characters outside
// [A-Za-z0-9._-] in each segment become '_'.
func (s *Store) Put(ctx context.Context, name string, data []byte) (Ref, error) {
	ref := s.RefFor(name, data)
	if err := s.Write(ctx, ref, data); err != nil {
		return Ref{}, err
	}
	return ref, nil
}

// RefFor returns the reference Put(name, data) writes, without writing:
// a caller that must decide before it may write (the engine's pure
// decisions) computes the reference first and writes it later with
// Write.
func (s *Store) RefFor(name string, data []byte) Ref {
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	return Ref{URI: s.base + cleanName(name) + "/" + hexSum + ".json", Size: int64(len(data)), SHA256: hexSum}
}

// Write writes data as the object ref names (a reference RefFor made).
func (s *Store) Write(ctx context.Context, ref Ref, data []byte) error {
	if !s.Owns(ref) {
		return fmt.Errorf("%w: %s (store %s)", ErrForeign, ref.URI, s.base)
	}
	key := s.prefix + strings.TrimPrefix(ref.URI, s.base)
	// Not Bucket.WriteAll: it closes a writer whose write failed, which
	// commits what was written (fileblob renames the truncated temporary
	// file of a full disk into place). Cancelling the writer's context
	// before Close abandons the object instead.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.b.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/json"})
	if err != nil {
		return fmt.Errorf("resultstore: write %s: %w", ref.URI, err)
	}
	if _, err := w.Write(data); err != nil {
		cancel()
		_ = w.Close()
		return fmt.Errorf("resultstore: write %s: %w", ref.URI, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("resultstore: write %s: %w", ref.URI, err)
	}
	return nil
}

// Get reads the object ref names and checks its size and SHA-256.
func (s *Store) Get(ctx context.Context, ref Ref) ([]byte, error) {
	if !s.Owns(ref) {
		return nil, fmt.Errorf("%w: %s (store %s)", ErrForeign, ref.URI, s.base)
	}
	key := s.prefix + strings.TrimPrefix(ref.URI, s.base)
	data, err := s.b.ReadAll(ctx, key)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, ref.URI)
		}
		return nil, fmt.Errorf("resultstore: read %s: %w", ref.URI, err)
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != ref.Size || hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, fmt.Errorf("%w: %s: read %d bytes with SHA-256 %x, want %d bytes with %s",
			ErrCorrupt, ref.URI, len(data), sum, ref.Size, ref.SHA256)
	}
	return data, nil
}

// keyByte reports whether c may stand in a key as it is.
func keyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// cleanName maps each segment of name to [A-Za-z0-9._-]+, so keys are
// the same on every backend; "." and ".." segments are not kept as such.
func cleanName(name string) string {
	segs := strings.Split(strings.Trim(name, "/"), "/")
	for i, seg := range segs {
		b := []byte(seg)
		for j, c := range b {
			if !keyByte(c) {
				b[j] = '_'
			}
		}
		seg = string(b)
		if seg == "" || seg == "." || seg == ".." {
			seg = "_" + seg
		}
		segs[i] = seg
	}
	return strings.Join(segs, "/")
}
