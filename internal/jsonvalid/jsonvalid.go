// Package jsonvalid reports whether bytes are one valid JSON value, with
// exactly encoding/json.Valid's answers (the differential test and fuzz
// target hold it to them) at several times its speed: the event logs
// check every payload they append, and a frame's payloads are most of an
// append's bytes.
package jsonvalid

// maxDepth is encoding/json's nesting limit: a value nested deeper is
// invalid.
const maxDepth = 10000

// Valid reports whether data is one JSON value, with only whitespace
// around it, as encoding/json.Valid does: strings may hold any byte but
// the control characters (invalid UTF-8 included), and objects and
// arrays nest at most 10,000 deep.
func Valid(data []byte) bool {
	var buf [64]byte
	stack := buf[:0] // the open containers: '{' or '['
	n := len(data)
	i := Space(data, 0)
	for {
		// A value starts at i.
		if i >= n {
			return false
		}
		switch c := data[i]; c {
		case '{', '[':
			if len(stack) == maxDepth {
				return false
			}
			stack = append(stack, c)
			i = Space(data, i+1)
			if i < n && data[i] == c+2 { // '}' or ']'
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				var ok bool
				if i, ok = member(data, i); !ok {
					return false
				}
			}
			continue
		case '"':
			var ok bool
			if i, ok = str(data, i); !ok {
				return false
			}
		case 't':
			if !lit(data, i, "true") {
				return false
			}
			i += 4
		case 'f':
			if !lit(data, i, "false") {
				return false
			}
			i += 5
		case 'n':
			if !lit(data, i, "null") {
				return false
			}
			i += 4
		default:
			var ok bool
			if i, ok = number(data, i); !ok {
				return false
			}
		}
		// A value ended at i: close what it ends, or go on to the next
		// element.
		for {
			i = Space(data, i)
			if len(stack) == 0 {
				return i == n
			}
			if i >= n {
				return false
			}
			top := stack[len(stack)-1]
			if data[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if data[i] != ',' {
				return false
			}
			i = Space(data, i+1)
			if top == '{' {
				var ok bool
				if i, ok = member(data, i); !ok {
					return false
				}
			}
			break
		}
	}
}

// member reads an object member's name and colon at i and returns where
// its value starts.
func member(data []byte, i int) (int, bool) {
	if i >= len(data) || data[i] != '"' {
		return i, false
	}
	i, ok := str(data, i)
	if !ok {
		return i, false
	}
	i = Space(data, i)
	if i >= len(data) || data[i] != ':' {
		return i, false
	}
	return Space(data, i+1), true
}

// Space returns the index of the first byte of data at or after i that
// is not JSON whitespace (len(data) if there is none).
func Space(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func lit(data []byte, i int, word string) bool {
	return len(data)-i >= len(word) && string(data[i:i+len(word)]) == word
}

// str reads the string that starts at data[i] == '"' and returns the
// index after its closing quote.
func str(data []byte, i int) (int, bool) {
	for i++; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(data)-i <= 4 {
					return i, false
				}
				for _, h := range data[i+1 : i+5] {
					if !isHex(h) {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number reads the number at i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func number(data []byte, i int) (int, bool) {
	n := len(data)
	if i < n && data[i] == '-' {
		i++
	}
	switch {
	case i >= n:
		return i, false
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i = digits(data, i+1)
	default:
		return i, false
	}
	if i < n && data[i] == '.' {
		j := digits(data, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(data, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}
