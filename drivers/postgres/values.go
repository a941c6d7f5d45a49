package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cursorflow/cursorflow/cursor/sqlcursor"
	"github.com/cursorflow/cursorflow/internal/jsonnum"
)

// normalize converts the values pgx decodes into JSON-friendly Go values:
// numeric as jsonnum.Decimal does (int64 when integral and in range,
// float64 when that float64 is the same decimal, else its exact text;
// "NaN", "Infinity" and "-Infinity" stay strings); uuid its canonical
// string; arrays []any; everything else as sqlcursor.Normalize does.
func normalize(v any) any {
	switch v := v.(type) {
	case pgtype.Numeric:
		return numeric(v)
	case [16]byte:
		return fmt.Sprintf("%x-%x-%x-%x-%x", v[0:4], v[4:6], v[6:8], v[8:10], v[10:16])
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalize(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalize(e)
		}
		return out
	}
	return sqlcursor.Normalize(v)
}

func numeric(n pgtype.Numeric) any {
	switch {
	case !n.Valid:
		return nil
	case n.NaN:
		return "NaN"
	case n.InfinityModifier == pgtype.Infinity:
		return "Infinity"
	case n.InfinityModifier == pgtype.NegativeInfinity:
		return "-Infinity"
	case n.Int == nil:
		return int64(0)
	}
	text, err := n.Value()
	if s, ok := text.(string); ok && err == nil {
		return jsonnum.Decimal(s)
	}
	return fmt.Sprint(text)
}

// decodeJSON decodes json/jsonb text keeping integers exact: integral
// numbers become int64, others float64. strs, when set, keeps the text
// of a small document (see jsonnum.Strings).
func decodeJSON(raw []byte, strs *jsonnum.Strings) (any, error) {
	var v any
	var err error
	if strs != nil {
		v, err = strs.Decode(raw)
	} else {
		v, err = jsonnum.Decode(raw)
	}
	if err != nil {
		return nil, fmt.Errorf("decode json: %w", err)
	}
	return v, nil
}
