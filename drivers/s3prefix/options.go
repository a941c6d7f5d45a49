package s3prefix

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Option names read from the cursor block (Spec.Options).
const (
	OptURL          = "url"
	OptPrefix       = "prefix"
	OptDonePrefix   = "done_prefix"
	OptLeasePrefix  = "lease_prefix"
	OptDeadPrefix   = "dead_prefix"
	OptReadBody     = "read_body"
	OptMaxBodyBytes = "max_body_bytes"
	OptBodyJSON     = "body_json"
)

// Defaults of the options.
const (
	// DefaultPrefix is the pending prefix when the cursor block names none.
	DefaultPrefix = "pending/"
	// DefaultMaxBodyBytes caps the bodies read with read_body (1 MiB).
	DefaultMaxBodyBytes = 1 << 20
)

// ErrOption is wrapped by every error about a cursor block's options.
var ErrOption = errors.New("s3prefix: invalid option")

// Options are a cursor's parsed options.
type Options struct {
	// Prefix holds the pending objects: every object under it is a row.
	// Defaults to DefaultPrefix.
	Prefix string
	// DonePrefix receives acknowledged objects. Defaults to the parent of
	// Prefix plus "done/" (jobs/pending/ → jobs/done/).
	DonePrefix string
	// LeasePrefix holds the lease markers. Defaults to the parent of
	// Prefix plus "leases/".
	LeasePrefix string
	// DeadPrefix receives dead-lettered objects. Defaults to the parent of
	// Prefix plus "dead/".
	DeadPrefix string
	// ReadBody puts each object's body into Row.Values["body"] when it is
	// at most MaxBodyBytes long. Defaults to false.
	ReadBody bool
	// MaxBodyBytes bounds the bodies read. Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyJSON decodes the body as JSON. Defaults to false (the body is a
	// string). Either way a body that is not valid UTF-8 is base64, with
	// Row.Values["body_base64"] set to true.
	BodyJSON bool
}

var knownOptions = map[string]bool{
	OptURL: true, OptPrefix: true, OptDonePrefix: true, OptLeasePrefix: true,
	OptDeadPrefix: true, OptReadBody: true, OptMaxBodyBytes: true, OptBodyJSON: true,
}

// parentOf returns the "directory" holding prefix: jobs/pending/ →
// jobs/, pending/ → "".
func parentOf(prefix string) string {
	p := strings.TrimSuffix(prefix, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i+1]
	}
	return ""
}

// ParseOptions reads a cursor block's options. Unknown keys are logged
// (a playbook may carry keys for other tools) and ignored; a logger of nil
// means slog.Default().
func ParseOptions(opts map[string]any, logger *slog.Logger) (Options, error) {
	if logger == nil {
		logger = slog.Default()
	}
	o := Options{MaxBodyBytes: DefaultMaxBodyBytes}
	var unknown []string
	for k := range opts {
		if !knownOptions[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		logger.Warn("s3prefix: ignoring unknown cursor options", "options", unknown)
	}
	var err error
	if o.Prefix, err = optString(opts, OptPrefix, DefaultPrefix); err != nil {
		return o, err
	}
	if o.Prefix == "" {
		return o, fmt.Errorf("%w %s: empty (the whole bucket cannot be the queue)", ErrOption, OptPrefix)
	}
	parent := parentOf(o.Prefix)
	if o.DonePrefix, err = optString(opts, OptDonePrefix, parent+"done/"); err != nil {
		return o, err
	}
	if o.LeasePrefix, err = optString(opts, OptLeasePrefix, parent+"leases/"); err != nil {
		return o, err
	}
	if o.DeadPrefix, err = optString(opts, OptDeadPrefix, parent+"dead/"); err != nil {
		return o, err
	}
	if o.ReadBody, err = optBool(opts, OptReadBody); err != nil {
		return o, err
	}
	if o.BodyJSON, err = optBool(opts, OptBodyJSON); err != nil {
		return o, err
	}
	if o.MaxBodyBytes, err = optInt(opts, OptMaxBodyBytes, DefaultMaxBodyBytes); err != nil {
		return o, err
	}
	if o.MaxBodyBytes < 1 {
		return o, fmt.Errorf("%w %s: %d, want at least 1", ErrOption, OptMaxBodyBytes, o.MaxBodyBytes)
	}
	// No prefix may contain another: a done object under the pending
	// prefix would be claimed again, a marker would become a row.
	named := []struct{ name, val string }{
		{OptPrefix, o.Prefix}, {OptDonePrefix, o.DonePrefix},
		{OptLeasePrefix, o.LeasePrefix}, {OptDeadPrefix, o.DeadPrefix},
	}
	for i, a := range named {
		if a.val == "" {
			return o, fmt.Errorf("%w %s: empty", ErrOption, a.name)
		}
		for _, b := range named[i+1:] {
			if strings.HasPrefix(a.val, b.val) || strings.HasPrefix(b.val, a.val) {
				return o, fmt.Errorf("%w: %s %q and %s %q overlap; every prefix needs its own part of the bucket",
					ErrOption, a.name, a.val, b.name, b.val)
			}
		}
	}
	return o, nil
}

func optString(opts map[string]any, key, def string) (string, error) {
	v, ok := opts[key]
	if !ok || v == nil {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w %s: %T, want a string", ErrOption, key, v)
	}
	return s, nil
}

func optBool(opts map[string]any, key string) (bool, error) {
	switch v := opts[key].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return false, fmt.Errorf("%w %s: %q, want true or false", ErrOption, key, v)
		}
		return b, nil
	default:
		return false, fmt.Errorf("%w %s: %T, want true or false", ErrOption, key, v)
	}
}

func optInt(opts map[string]any, key string, def int64) (int64, error) {
	switch v := opts[key].(type) {
	case nil:
		return def, nil
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("%w %s: %d is too large", ErrOption, key, v)
		}
		return int64(v), nil
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, fmt.Errorf("%w %s: %v, want an integer", ErrOption, key, v)
		}
		return int64(v), nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w %s: %q, want an integer", ErrOption, key, v)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("%w %s: %T, want an integer", ErrOption, key, v)
	}
}
