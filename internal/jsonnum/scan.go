package jsonnum

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/cursorflow/cursorflow/internal/jsonvalid"
)

// decodePlain parses data as Decode does, without encoding/json's
// Decoder (which copies the input into its own buffer and builds every
// number as a json.Number first). ok is false for anything it is not sure
// to read exactly as the Decoder would, invalid JSON included: the
// caller then decodes with the Decoder, which also words the error.
func decodePlain(data []byte, strs *Strings) (v any, ok bool) {
	p := plainParser{data: data, strs: strs}
	p.space()
	v, ok = p.value(0)
	if !ok {
		return nil, false
	}
	p.space()
	return v, p.i == len(p.data)
}

type plainParser struct {
	data []byte
	i    int
	// doc is data as one string, made on the first string that needs
	// one when data is at most sharedDoc bytes: the document's strings
	// (its keys included) are then cut from it, one allocation for all.
	doc string
	// strs, when set, holds doc: see Strings.
	strs *Strings
}

// sharedDoc is the size up to which a document's strings share one copy
// of it. A string kept alone keeps the whole copy alive, so only a small
// document's is shared: what a kept string can hold on to stays small.
const sharedDoc = 256

// maxPlainDepth is far below the Decoder's own bound; deeper values are
// left to it.
const maxPlainDepth = 500

func (p *plainParser) space() { p.i = jsonvalid.Space(p.data, p.i) }

func (p *plainParser) literal(word string, v any) (any, bool) {
	if len(p.data)-p.i < len(word) || string(p.data[p.i:p.i+len(word)]) != word {
		return nil, false
	}
	p.i += len(word)
	return v, true
}

func (p *plainParser) value(depth int) (any, bool) {
	if p.i >= len(p.data) || depth > maxPlainDepth {
		return nil, false
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == 't':
		return p.literal("true", true)
	case c == 'f':
		return p.literal("false", false)
	case c == 'n':
		return p.literal("null", nil)
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return nil, false
}

func (p *plainParser) object(depth int) (any, bool) {
	p.i++ // {
	m := map[string]any{}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return m, true
	}
	for {
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, false
		}
		k, ok := p.text()
		if !ok {
			return nil, false
		}
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.space()
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[k] = v
		if more, ok := p.separator('}'); !ok || !more {
			return m, ok
		}
	}
}

// separator reads what follows a member: a comma (more is true) or the
// closing bracket.
func (p *plainParser) separator(closing byte) (more, ok bool) {
	p.space()
	if p.i >= len(p.data) {
		return false, false
	}
	switch p.data[p.i] {
	case ',':
		p.i++
		return true, true
	case closing:
		p.i++
		return false, true
	}
	return false, false
}

func (p *plainParser) array(depth int) (any, bool) {
	p.i++ // [
	l := []any{}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return l, true
	}
	for {
		p.space()
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		l = append(l, v)
		if more, ok := p.separator(']'); !ok || !more {
			return l, ok
		}
	}
}

// str reads a string. One with escapes is decoded by encoding/json; one
// with bytes that are not UTF-8 (which the Decoder replaces) is left to
// the caller's fallback.
func (p *plainParser) str() (any, bool) {
	s, ok := p.text()
	if !ok {
		return nil, false
	}
	return s, true
}

// text is str as a string: an object's key, which would be boxed only to
// be taken out again.
func (p *plainParser) text() (string, bool) {
	start := p.i
	p.i++ // "
	escaped, ascii := false, true
	for ; p.i < len(p.data); p.i++ {
		switch c := p.data[p.i]; {
		case c == '"':
			raw := p.data[start+1 : p.i]
			p.i++
			switch {
			case !ascii && !utf8.Valid(raw):
				return "", false
			case escaped:
				if s, ok := unescape(raw); ok {
					return s, true
				}
				var s string
				if err := json.Unmarshal(p.data[start:p.i], &s); err != nil {
					return "", false
				}
				return s, true
			}
			return p.cut(raw, start+1), true
		case c == '\\':
			escaped = true
			p.i++
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// cut returns raw, the bytes of data from offset at, as a string: a
// slice of doc when the document is small enough to share, else its own.
func (p *plainParser) cut(raw []byte, at int) string {
	if len(raw) < 2 || len(p.data) > sharedDoc {
		// "" and one byte are no allocation of their own.
		return string(raw)
	}
	if p.doc == "" {
		if p.strs != nil {
			p.doc = p.strs.copy(p.data)
		} else {
			p.doc = string(p.data)
		}
	}
	return p.doc[at : at+len(raw)]
}

// number reads a number of JSON's grammar and converts it with Number.
func (p *plainParser) number() (any, bool) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.data[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.data) && p.data[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, false
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	raw := p.data[start:p.i]
	// Number's first case, on the bytes: an integer that fits makes no
	// string (ParseInt keeps no reference to its argument, so string(raw)
	// is not allocated).
	if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return i, true
	}
	return Number(json.Number(raw)), true
}

// unescape decodes the body of a JSON string (valid UTF-8, between its
// quotes) whose escapes are all of one character: \" \\ \/ \b \f \n \r
// \t, the ones a playbook's source or a message is full of. ok is false
// for \u escapes, which encoding/json decodes (surrogate pairs, and the
// replacement of lone ones).
func unescape(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(raw) {
			return "", false
		}
		switch raw[i] {
		case '"', '\\', '/':
			out = append(out, raw[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			return "", false
		}
	}
	return string(out), true
}
