package sqlcursor

import (
	"encoding/json"
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
	// Row.Key is built from them by RowKey.
	OptKey = "key"
	// OptAck is a statement run after rows succeeded.
	OptAck = "ack"
	// OptRelease is a statement that hands rows back for another claim.
	OptRelease = "release"
	// OptDeadLetter is a statement that moves rows to a dead letter.
	OptDeadLetter = "dead_letter"
	// OptClaimParams lists the values bound to the claim's parameters
	// ($1, $2, ... or ?), rendered per claim like the claim itself.
	OptClaimParams = "claim_params"
)

// TemplateOptions returns the option keys a SQL driver renders itself per
// call; the engine must pass them unrendered (see cursor.TemplateOptioner).
func TemplateOptions() []string { return []string{OptAck, OptRelease, OptDeadLetter, OptClaimParams} }

// OptionKeys returns every option key ParseOptions reads; a SQL driver's
// OptionKeys (cursor.OptionKeyLister) starts from it.
func OptionKeys() []string {
	return []string{OptKey, OptAck, OptRelease, OptDeadLetter, OptClaimParams}
}

// Statement is a SQL statement option: the SQL, and the values bound to
// its parameters when it has params. Written as a string (no params) or
// as {sql: ..., params: [...]}.
type Statement struct {
	SQL *dsl.Template
	// Params are rendered per call, with the statement's variables, and
	// bound in order; nil means the SQL runs as written (it may then hold
	// several statements).
	Params []*dsl.Value
}

// Options are the parsed options of a SQL cursor block.
type Options struct {
	// Key lists the key columns; empty means "id if returned, else the
	// first returned column".
	Key []string
	// Ack, Release and DeadLetter are compiled statements; nil when not
	// configured. They (and their params) are rendered with the loop scope
	// plus keys, rows, errors and (dead letter only) reason (Vars).
	Ack, Release, DeadLetter *Statement
	// ClaimParams are bound to the claim's parameters; nil when the claim
	// has none.
	ClaimParams []*dsl.Value
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
		case OptClaimParams:
			params, err := compileParams(k, v)
			if err != nil {
				return Options{}, err
			}
			o.ClaimParams = params
		case OptAck, OptRelease, OptDeadLetter:
			t, err := compileStatement(k, v)
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

// CompileStatement compiles a statement option: a SQL string, or
// {sql: ..., params: [...]} (nil for an empty one).
func CompileStatement(name string, v any) (*Statement, error) { return compileStatement(name, v) }

func compileStatement(name string, v any) (*Statement, error) {
	var sqlV, paramsV any = v, nil
	if m, ok := v.(map[string]any); ok {
		for k := range m {
			if k != "sql" && k != "params" {
				return nil, fmt.Errorf("sql cursor: option %q: unknown key %q (want sql and params)", name, k)
			}
		}
		sqlV, paramsV = m["sql"], m["params"]
	}
	var t *dsl.Template
	switch x := sqlV.(type) {
	case nil:
		return nil, nil
	case string:
		if strings.TrimSpace(x) == "" {
			return nil, nil
		}
		var err error
		if t, err = dsl.CompileTemplate(x, dsl.Pos{}); err != nil {
			return nil, fmt.Errorf("sql cursor: option %q: %w", name, err)
		}
	case *dsl.Template:
		t = x
	default:
		return nil, fmt.Errorf("sql cursor: option %q is %T, want a SQL statement", name, v)
	}
	params, err := compileParams(name+".params", paramsV)
	if err != nil {
		return nil, err
	}
	return &Statement{SQL: t, Params: params}, nil
}

// compileParams compiles a params list: strings are templates, other
// values constants.
func compileParams(name string, v any) ([]*dsl.Value, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("sql cursor: option %q is %T, want a list of values", name, v)
	}
	out := make([]*dsl.Value, len(list))
	for i, e := range list {
		if s, ok := e.(string); ok {
			val, err := dsl.NewScalarValue(s, dsl.Pos{})
			if err != nil {
				return nil, fmt.Errorf("sql cursor: option %q[%d]: %w", name, i, err)
			}
			out[i] = val
			continue
		}
		out[i] = dsl.NewLiteralValue(e, dsl.Pos{})
	}
	return out, nil
}

// RenderParams renders params against vars into the values to bind: nil,
// strings, numbers and booleans as they are, lists and maps as their JSON
// text (cast or parse them in the SQL). It returns nil for no params, and
// an empty, non-nil list for an empty params list. A Cursor whose
// Executor is a ListBinder keeps lists as lists ([]any).
func RenderParams(params []*dsl.Value, vars map[string]any) ([]any, error) {
	return renderParams(params, vars, false)
}

// ListBinder is implemented by an Executor that binds a list itself (the
// postgres driver: as an array where the statement wants one, else as its
// JSON): its args hold list values as []any, where other executors get
// their JSON text.
type ListBinder interface {
	BindsLists() bool
}

func renderParams(params []*dsl.Value, vars map[string]any, keepLists bool) ([]any, error) {
	if params == nil {
		return nil, nil
	}
	out := make([]any, len(params))
	for i, p := range params {
		v, err := p.Render(vars)
		if err != nil {
			return nil, fmt.Errorf("params[%d]: %w", i, err)
		}
		_, isList := v.([]any)
		_, isMap := v.(map[string]any)
		if isMap || isList && !keepLists {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("params[%d]: %w", i, err)
			}
			v = string(b)
		}
		out[i] = v
	}
	return out, nil
}
