package sqlcursor

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/cursorflow/cursorflow/dsl"
)

// Option keys of a SQL cursor block (besides kind, auth and claim, which
// the engine consumes).
const (
	// OptKey names the column or columns identifying a row: a string
	// ("id", or "tenant, id" for a composite key) or a list of strings.
	OptKey = "key"
	// OptAck is a statement run after rows succeeded.
	OptAck = "ack"
	// OptRelease is a statement that hands rows back for another claim.
	OptRelease = "release"
	// OptDeadLetter is a statement that moves rows to a dead letter.
	OptDeadLetter = "dead_letter"
)

// TemplateOptions returns the option keys a SQL driver renders itself per
// call; the engine must pass them unrendered (see cursor.TemplateOptioner).
func TemplateOptions() []string { return []string{OptAck, OptRelease, OptDeadLetter} }

// Options are the parsed options of a SQL cursor block.
type Options struct {
	// Key lists the key columns; empty means "id if returned, else the
	// first returned column".
	Key []string
	// Ack, Release and DeadLetter are compiled statements; nil when not
	// configured. They are rendered with the loop scope plus keys, rows and
	// (dead letter only) reason.
	Ack, Release, DeadLetter *dsl.Template
}

// ParseOptions reads the SQL options out of a cursor block's options.
// Statements are compiled once here (positions are not known to the
// driver, so diagnostics carry the zero position). Keys it does not know
// are reported to logger at debug level (a cursor is opened per frame)
// and otherwise ignored, since the engine may hand over keys meant for
// itself.
func ParseOptions(opts map[string]any, logger *slog.Logger) (Options, error) {
	var o Options
	var unknown []string
	for k, v := range opts {
		switch k {
		case OptKey:
			key, err := parseKey(v)
			if err != nil {
				return Options{}, err
			}
			o.Key = key
		case OptAck, OptRelease, OptDeadLetter:
			t, err := compileOption(k, v)
			if err != nil {
				return Options{}, err
			}
			switch k {
			case OptAck:
				o.Ack = t
			case OptRelease:
				o.Release = t
			default:
				o.DeadLetter = t
			}
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 && logger != nil {
		sort.Strings(unknown)
		logger.Debug("sql cursor: ignoring unknown cursor options", "options", unknown)
	}
	return o, nil
}

func parseKey(v any) ([]string, error) {
	var parts []string
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		parts = strings.Split(v, ",")
	case []string:
		parts = v
	case []any:
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("sql cursor: option %q: element %d is %T, want a column name", OptKey, i, e)
			}
			parts = append(parts, s)
		}
	default:
		return nil, fmt.Errorf("sql cursor: option %q is %T, want a column name or a list of them", OptKey, v)
	}
	var key []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("sql cursor: option %q: empty column name in %v", OptKey, v)
		}
		key = append(key, p)
	}
	return key, nil
}

func compileOption(name string, v any) (*dsl.Template, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		if strings.TrimSpace(v) == "" {
			return nil, nil
		}
		t, err := dsl.CompileTemplate(v, dsl.Pos{})
		if err != nil {
			return nil, fmt.Errorf("sql cursor: option %q: %w", name, err)
		}
		return t, nil
	case *dsl.Template:
		return v, nil
	default:
		return nil, fmt.Errorf("sql cursor: option %q is %T, want a SQL statement", name, v)
	}
}
