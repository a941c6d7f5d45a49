package postgres

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
)

// Type OIDs the decoder knows (pg_type.oid; stable across servers).
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidOID         = 26
	oidJSON        = 114
	oidJSONArr     = 199
	oidFloat4      = 700
	oidFloat8      = 701
	oidBoolArr     = 1000
	oidInt2Arr     = 1005
	oidInt4Arr     = 1007
	oidTextArr     = 1009
	oidBPCharArr   = 1014
	oidVarcharArr  = 1015
	oidInt8Arr     = 1016
	oidFloat4Arr   = 1021
	oidFloat8Arr   = 1022
	oidOIDArr      = 1028
	oidNameArr     = 1003
	oidTimestamp   = 1114
	oidTSArr       = 1115
	oidDateArr     = 1182
	oidTimestamptz = 1184
	oidTSTZArr     = 1185
	oidNumericArr  = 1231
	oidNumeric     = 1700
	oidUUIDArr     = 2951
	oidJSONB       = 3802
	oidJSONBArr    = 3807
	oidTextOID     = 25
)

// arrayElem maps an array type to its element type. Arrays of other types
// are decoded as text elements.
var arrayElem = map[uint32]uint32{
	oidBoolArr: oidBool, oidInt2Arr: oidInt2, oidInt4Arr: oidInt4, oidInt8Arr: oidInt8,
	oidTextArr: oidTextOID, oidBPCharArr: oidTextOID, oidVarcharArr: oidTextOID, oidNameArr: oidTextOID,
	oidFloat4Arr: oidFloat4, oidFloat8Arr: oidFloat8, oidOIDArr: oidOID, oidNumericArr: oidNumeric,
	oidJSONArr: oidJSON, oidJSONBArr: oidJSONB, oidUUIDArr: oidTextOID,
	oidTSArr: oidTimestamp, oidTSTZArr: oidTimestamptz, oidDateArr: oidTextOID,
	1001: oidBytea, // bytea[]
}

// decode converts one text-format value of type oid to a JSON-friendly Go
// value. See the package documentation for the mapping.
func decode(oid uint32, raw []byte) any {
	if raw == nil {
		return nil
	}
	switch oid {
	case oidBool:
		return len(raw) > 0 && raw[0] == 't'
	case oidInt2, oidInt4, oidInt8, oidOID:
		if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return i
		}
		return string(raw)
	case oidFloat4, oidFloat8:
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return string(raw) // NaN, Infinity: JSON has no such numbers
		}
		return f
	case oidNumeric:
		return jsonnum.Decimal(string(raw))
	case oidJSON, oidJSONB:
		if v, err := jsonnum.Decode(raw); err == nil {
			return v
		}
		return string(raw)
	case oidTimestamptz:
		return decodeTime(string(raw), true)
	case oidTimestamp:
		return decodeTime(string(raw), false)
	}
	if elem, ok := arrayElem[oid]; ok {
		if v, ok := decodeArray(string(raw), elem); ok {
			return v
		}
	}
	return string(raw)
}

var tzLayouts = [...]string{
	"2006-01-02 15:04:05.999999999-07",
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999-07:00:00",
}

// decodeTime renders a timestamp as RFC 3339 (timestamptz, with its
// offset) or as ISO 8601 without zone (timestamp), like Python's
// isoformat. Values such as infinity or BC dates stay as text.
func decodeTime(s string, tz bool) any {
	if tz {
		for _, l := range tzLayouts {
			if t, err := time.Parse(l, s); err == nil {
				return t.Format(time.RFC3339Nano)
			}
		}
		return s
	}
	if t, err := time.Parse("2006-01-02 15:04:05.999999999", s); err == nil {
		return t.Format("2006-01-02T15:04:05.999999999")
	}
	return s
}

// decodeArray parses a text-format array literal ({1,2}, {{a,b},{c,d}},
// {"x y",NULL}, [0:1]={1,2}) into nested []any with elements decoded by
// elem.
func decodeArray(s string, elem uint32) (any, bool) {
	if i := strings.IndexByte(s, '='); i > 0 && s[0] == '[' {
		s = s[i+1:]
	}
	p := arrayParser{s: s, elem: elem}
	v, ok := p.parse()
	if !ok || p.i != len(p.s) {
		return nil, false
	}
	return v, true
}

type arrayParser struct {
	s    string
	i    int
	elem uint32
}

func (p *arrayParser) parse() (any, bool) {
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, false
	}
	p.i++
	out := []any{}
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return out, true
	}
	for p.i < len(p.s) {
		var v any
		switch p.s[p.i] {
		case '{':
			sub, ok := p.parse()
			if !ok {
				return nil, false
			}
			v = sub
		case '"':
			p.i++
			var b strings.Builder
			for p.i < len(p.s) && p.s[p.i] != '"' {
				if p.s[p.i] == '\\' && p.i+1 < len(p.s) {
					p.i++
				}
				b.WriteByte(p.s[p.i])
				p.i++
			}
			if p.i >= len(p.s) {
				return nil, false
			}
			p.i++
			v = decode(p.elem, []byte(b.String()))
		default:
			start := p.i
			for p.i < len(p.s) && p.s[p.i] != ',' && p.s[p.i] != '}' {
				p.i++
			}
			tok := strings.TrimSpace(p.s[start:p.i])
			if tok == "NULL" {
				v = nil
			} else {
				v = decode(p.elem, []byte(tok))
			}
		}
		out = append(out, v)
		if p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return out, true
		default:
			return nil, false
		}
	}
	return nil, false
}
