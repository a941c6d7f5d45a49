package dsl

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
)

// NoETL renders a template to text and then reads the text as a value
// (noetl/core/dsl/render.py's render_template): "[1, 2]" is a list,
// "true" a bool, "42" an int, "None" null. Playbooks written for it build
// lists with {% for %} and flags with {% if %} and expect values, so a
// text template's result is read the same way here (coerceText), in the
// same order. A template that uses tojson keeps its text, as there.

// keepsText reports whether a template's source asks for text that must
// stay text: JSON (tojson, which NoETL then leaves as text) or SQL
// (sql_literal, sql_ident: a quoted SQL literal would read as a Python
// string, its doubled quotes lost).
func keepsText(src string) bool {
	for _, f := range []string{"tojson", "to_json", "sql_literal", "sql_ident"} {
		if strings.Contains(src, "| "+f) || strings.Contains(src, "|"+f) {
			return true
		}
	}
	return false
}

// coerceText reads a text template's rendered text s as NoETL does; false
// when s stays the text it is.
func coerceText(s string) (any, bool) {
	if s == "" {
		return nil, false
	}
	if (strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]")) || (strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}")) {
		var v any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&v); err == nil && !dec.More() {
			if normalizeJSON(&v) {
				return v, true
			}
			return nil, false // an int past int64: the text keeps its digits
		}
		if v, ok := parsePyLiteral(s); ok {
			return v, true
		}
	}
	switch {
	case strings.EqualFold(s, "true"):
		return true, true
	case strings.EqualFold(s, "false"):
		return false, true
	}
	if isDigits(s) {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
		// Past int64 (a 20-digit id): Python keeps every digit of the
		// int; a float would not, the text does.
		return nil, false
	}
	if floatLike(s) {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f, true
		}
	}
	if t := strings.TrimSpace(s); strings.EqualFold(t, "none") || strings.EqualFold(t, "null") {
		return nil, true
	}
	if mayBePyLiteral(s) {
		if v, ok := parsePyLiteral(s); ok {
			return v, true
		}
	}
	if s != "" && strings.TrimSpace(s) == "" {
		return "", true
	}
	return nil, false
}

// isDigits is Python's str.isdigit for the ASCII digits NoETL's playbooks
// hold: non-empty, digits only.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// floatLike is NoETL's test for a float: a '.', 'e' or 'E' in the text,
// and digits once the first of each and then the leading signs are taken
// away ("-1.5", "1e5"; not "1e-5", which the literal reading takes).
func floatLike(s string) bool {
	if !strings.ContainsAny(s, ".eE") {
		return false
	}
	var dot, e, bigE bool
	lead, digits := true, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.' && !dot:
			dot = true
		case c == 'e' && !e:
			e = true
		case c == 'E' && !bigE:
			bigE = true
		case lead && (c == '+' || c == '-'):
		case c >= '0' && c <= '9':
			lead = false
			digits++
		default:
			return false
		}
	}
	return digits > 0
}

// normalizeJSON turns the json.Numbers in *v into int64 (or float64)
// values, as templates' native values are; false if an integer does not
// fit an int64.
func normalizeJSON(v *any) bool {
	switch t := (*v).(type) {
	case json.Number:
		if _, err := t.Int64(); err != nil && !strings.ContainsAny(string(t), ".eE") {
			return false
		}
		*v = jsonnum.Number(t)
	case []any:
		for i := range t {
			if !normalizeJSON(&t[i]) {
				return false
			}
		}
	case map[string]any:
		for k, x := range t {
			if !normalizeJSON(&x) {
				return false
			}
			t[k] = x
		}
	}
	return true
}

// mayBePyLiteral reports whether s starts (past spaces and tabs) as a
// Python literal can: most rendered text (SQL, a URL, a sentence) does
// not, and is not parsed.
func mayBePyLiteral(s string) bool {
	s = strings.TrimLeft(s, " \t")
	if s == "" {
		return false
	}
	switch c := s[0]; {
	case strings.IndexByte("[({'\"+-.", c) >= 0, c >= '0' && c <= '9':
		return true
	}
	return strings.HasPrefix(s, "True") || strings.HasPrefix(s, "False") || strings.HasPrefix(s, "None")
}

// parsePyLiteral reads s as Python's ast.literal_eval does for the values
// a template's text holds: numbers, strings, True, False, None, and
// lists, tuples (as lists) and dicts of them; leading spaces and tabs are
// skipped, as there. It reports false for anything else.
func parsePyLiteral(s string) (any, bool) {
	p := &pyParser{s: strings.TrimLeft(s, " \t")}
	v, ok := p.value()
	if !ok {
		return nil, false
	}
	p.space()
	if p.peek() == ',' {
		// A bare tuple: 1, 2.
		items := []any{v}
		for p.peek() == ',' {
			p.i++
			p.space()
			if p.i == len(p.s) {
				break
			}
			x, ok := p.value()
			if !ok {
				return nil, false
			}
			items = append(items, x)
			p.space()
		}
		v = items
	}
	if p.i != len(p.s) {
		return nil, false
	}
	return v, true
}

type pyParser struct {
	s     string
	i     int
	depth int
}

func (p *pyParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) value() (any, bool) {
	p.space()
	if p.depth > 100 {
		return nil, false
	}
	switch c := p.peek(); {
	case c == '[':
		return p.seq('[', ']')
	case c == '(':
		return p.seq('(', ')')
	case c == '{':
		return p.dict()
	case c == '\'' || c == '"':
		return p.str()
	case c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9':
		return p.number()
	}
	for _, w := range pyWords {
		if strings.HasPrefix(p.s[p.i:], w.word) && !identChar(p.s, p.i+len(w.word)) {
			p.i += len(w.word)
			return w.v, true
		}
	}
	return nil, false
}

// pyWords are the named constants of a Python literal.
var pyWords = []struct {
	word string
	v    any
}{{"True", true}, {"False", false}, {"None", nil}}

func identChar(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// seq reads a list or a tuple (a parenthesised single value without a
// comma is that value).
func (p *pyParser) seq(open, close byte) (any, bool) {
	p.i++
	p.depth++
	defer func() { p.depth-- }()
	items := []any{}
	comma := false
	for {
		p.space()
		if p.peek() == close {
			p.i++
			if open == '(' && len(items) == 1 && !comma {
				return items[0], true
			}
			return items, true
		}
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		items = append(items, v)
		p.space()
		switch p.peek() {
		case ',':
			p.i++
			comma = true
		case close:
		default:
			return nil, false
		}
	}
}

func (p *pyParser) dict() (any, bool) {
	p.i++
	p.depth++
	defer func() { p.depth-- }()
	m := map[string]any{}
	for {
		p.space()
		if p.peek() == '}' {
			p.i++
			return m, true
		}
		k, ok := p.value()
		if !ok {
			return nil, false
		}
		var key string
		switch k := k.(type) {
		case string:
			key = k
		case int64:
			key = strconv.FormatInt(k, 10)
		case bool:
			key = strconv.FormatBool(k)
		default:
			return nil, false // a set, or a key JSON cannot hold
		}
		p.space()
		if p.peek() != ':' {
			return nil, false
		}
		p.i++
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		m[key] = v
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case '}':
		default:
			return nil, false
		}
	}
}

// str reads a quoted string with Python's common escapes; adjacent
// literals ('a' 'b') are joined, as Python does.
func (p *pyParser) str() (any, bool) {
	var b strings.Builder
	for {
		q := p.peek()
		if strings.HasPrefix(p.s[p.i:], strings.Repeat(string(q), 3)) {
			return nil, false // triple quotes: not for a template's text
		}
		p.i++
		for closed := false; !closed; {
			if p.i >= len(p.s) {
				return nil, false
			}
			switch c := p.s[p.i]; c {
			case q:
				p.i++
				closed = true
			case '\n':
				return nil, false
			case '\\':
				if !p.escape(&b) {
					return nil, false
				}
			default:
				b.WriteByte(c)
				p.i++
			}
		}
		save := p.i
		p.space()
		if c := p.peek(); c != '\'' && c != '"' {
			p.i = save
			return b.String(), true
		}
	}
}

// escape reads the backslash escape at p.i into b.
func (p *pyParser) escape(b *strings.Builder) bool {
	if p.i+1 >= len(p.s) {
		return false
	}
	e := p.s[p.i+1]
	p.i += 2
	switch e {
	case 'n':
		b.WriteByte('\n')
	case 't':
		b.WriteByte('\t')
	case 'r':
		b.WriteByte('\r')
	case '0':
		b.WriteByte(0)
	case '\\', '\'', '"':
		b.WriteByte(e)
	case '\n': // a line continuation
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
		if p.i+n > len(p.s) {
			return false
		}
		r, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
		if err != nil || r > unicode.MaxRune {
			return false
		}
		b.WriteRune(rune(r))
		p.i += n
	default:
		b.WriteByte('\\')
		b.WriteByte(e)
	}
	return true
}

// number reads a Python int or float literal, with a sign, underscores
// between digits, and 0x, 0o and 0b prefixes; complex numbers are not
// read.
func (p *pyParser) number() (any, bool) {
	start := p.i
	for p.i < len(p.s) && strings.IndexByte("+-", p.s[p.i]) >= 0 {
		p.i++
	}
	neg := strings.Count(p.s[start:p.i], "-")%2 == 1
	body := p.i
	for p.i < len(p.s) && (identChar(p.s, p.i) || p.s[p.i] == '.' ||
		(p.s[p.i] == '+' || p.s[p.i] == '-') && p.i > body && (p.s[p.i-1] == 'e' || p.s[p.i-1] == 'E') && !strings.HasPrefix(strings.ToLower(p.s[body:]), "0x")) {
		p.i++
	}
	lit := p.s[body:p.i]
	if lit == "" || strings.HasSuffix(lit, "_") || strings.Contains(lit, "__") || strings.ContainsAny(lit, "jJ") {
		return nil, false
	}
	clean := strings.ReplaceAll(lit, "_", "")
	if isDigits(clean) && clean[0] == '0' && strings.Trim(clean, "0") != "" {
		return nil, false // 007: Python refuses a decimal int with leading zeros
	}
	if n, err := strconv.ParseInt(clean, 0, 64); err == nil {
		if neg {
			n = -n
		}
		return n, true
	}
	if isDigits(clean) {
		return nil, false // past int64: the text keeps its digits
	}
	f, err := strconv.ParseFloat(clean, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || strings.HasPrefix(strings.ToLower(clean), "0x") {
		return nil, false
	}
	if neg {
		f = -f
	}
	return f, true
}
