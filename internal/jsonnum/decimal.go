package jsonnum

import (
	"math"
	"strconv"
	"strings"
)

// Decimal converts the text of an exact decimal (SQL NUMERIC, DECIMAL)
// into a value of this package's kind without changing it: an int64 when it is an
// integer in range, a float64 when that float64 prints as the same
// decimal (12.50 becomes 12.5), and otherwise the text itself, so that
// 12345678901234567890.123456789 reaches a body's SQL with all its
// digits. Text that is not a number is returned as it is.
func Decimal(s string) any {
	intPart, frac, hasFrac := strings.Cut(s, ".")
	if !hasFrac || strings.Trim(frac, "0") == "" {
		if n, err := strconv.ParseInt(intPart, 10, 64); err == nil {
			return n
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return s
	}
	if trimDecimal(strconv.FormatFloat(f, 'f', -1, 64)) == trimDecimal(s) {
		return f
	}
	return s
}

// trimDecimal strips a leading plus sign, trailing fractional zeros and a
// bare point, so that equal decimals compare equal.
func trimDecimal(s string) string {
	s = strings.TrimPrefix(s, "+")
	if strings.IndexByte(s, '.') < 0 {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
