package mysql

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/cursor/sqlcursor"
	"github.com/cursorflow/cursorflow/internal/jsonnum"
)

// convert turns one scanned column value into a JSON-friendly Go value,
// given the column's type name as go-sql-driver reports it.
//
//   - DECIMAL becomes an int64 when integral and in range, a float64 when
//     that float64 is the same decimal, else its exact text
//     (jsonnum.Decimal), so no digit is lost.
//   - JSON (MySQL's JSON type) is decoded; integral numbers become int64.
//     MariaDB stores JSON as LONGTEXT, so there it stays a string.
//   - BIT(n) becomes an int64.
//   - a zero DATE, DATETIME or TIMESTAMP ('0000-00-00') stays MySQL's
//     text, "0000-00-00" or "0000-00-00 00:00:00" (as PyMySQL gives it).
//   - FLOAT becomes the float64 with the same shortest decimal form
//     (0.1, not 0.10000000149011612).
//   - everything else goes through sqlcursor.Normalize: integers int64,
//     times RFC 3339 strings in UTC, text strings, binary data base64
//     unless valid UTF-8.
func convert(typeName string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch strings.ToUpper(typeName) {
	case "DECIMAL", "NEWDECIMAL":
		if b, ok := v.([]byte); ok {
			return decimalValue(string(b))
		}
	case "JSON":
		if b, ok := v.([]byte); ok {
			return jsonValue(b)
		}
	case "DATE", "DATETIME", "TIMESTAMP":
		// MySQL's zero date ('0000-00-00', allowed unless sql_mode has
		// NO_ZERO_DATE) scans as Go's zero time; as that it would be
		// written back as 0001-01-01. It stays MySQL's text, as PyMySQL
		// returns it, so a body writes back what it read.
		if t, ok := v.(time.Time); ok && t.IsZero() {
			if strings.EqualFold(typeName, "DATE") {
				return "0000-00-00", nil
			}
			return "0000-00-00 00:00:00", nil
		}
	case "BIT":
		if b, ok := v.([]byte); ok && len(b) <= 8 {
			var n uint64
			for _, c := range b {
				n = n<<8 | uint64(c)
			}
			return sqlcursor.Normalize(n), nil
		}
	}
	if f, ok := v.(float32); ok {
		// The shortest decimal form of a float32 always parses back; were it
		// not to, the plainly widened value is still correct, only untidy.
		if d, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64); err == nil {
			return d, nil
		}
		return float64(f), nil
	}
	return sqlcursor.Normalize(v), nil
}

// decimalValue converts a DECIMAL's text form (jsonnum.Decimal),
// refusing text that is not a number.
func decimalValue(s string) (any, error) {
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		var ne *strconv.NumError
		if !errors.As(err, &ne) || !errors.Is(ne.Err, strconv.ErrRange) {
			return nil, fmt.Errorf("decimal %q: %w", s, err)
		}
	}
	return jsonnum.Decimal(s), nil
}

// jsonValue decodes a JSON column, keeping integers exact.
func jsonValue(b []byte) (any, error) {
	v, err := jsonnum.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("json: %w", err)
	}
	return v, nil
}
