package jsonnum

import (
	"bytes"
	"errors"

	"github.com/cursorflow/cursorflow/internal/jsonvalid"
)

// errNotPlain is Members' answer to input it does not read: the caller
// decodes it the ordinary way, which also words any error.
var errNotPlain = errors.New("jsonnum: not a plain JSON object")

// Members calls fn with each member of the JSON object data, in order:
// its key and its value as raw JSON (a slice of data). It is for JSON
// known to be valid (an event payload the log checked when it was
// appended): values are skipped over, not validated, which is what makes
// it fast on a payload whose large members the caller does not need. It
// reads only keys without escapes; on those, on anything that is not an
// object, and on malformed input it returns an error before calling fn
// for a member it could not read whole. fn's error stops it and is
// returned.
func Members(data []byte, fn func(key string, value []byte) error) error {
	i := jsonvalid.Space(data, 0)
	if i >= len(data) || data[i] != '{' {
		return errNotPlain
	}
	i = jsonvalid.Space(data, i+1)
	if i < len(data) && data[i] == '}' {
		if jsonvalid.Space(data, i+1) != len(data) {
			return errNotPlain
		}
		return nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return errNotPlain
		}
		end := bytes.IndexByte(data[i+1:], '"')
		if end < 0 || bytes.IndexByte(data[i+1:i+1+end], '\\') >= 0 {
			return errNotPlain
		}
		key := string(data[i+1 : i+1+end])
		i = jsonvalid.Space(data, i+2+end)
		if i >= len(data) || data[i] != ':' {
			return errNotPlain
		}
		i = jsonvalid.Space(data, i+1)
		j, ok := skipValue(data, i)
		if !ok {
			return errNotPlain
		}
		if err := fn(key, data[i:j]); err != nil {
			return err
		}
		i = jsonvalid.Space(data, j)
		if i >= len(data) {
			return errNotPlain
		}
		switch data[i] {
		case ',':
			i = jsonvalid.Space(data, i+1)
		case '}':
			if jsonvalid.Space(data, i+1) != len(data) {
				return errNotPlain
			}
			return nil
		default:
			return errNotPlain
		}
	}
}

// skipValue returns the end of the JSON value at data[i:], matching
// brackets and skipping strings; it trusts the value to be valid.
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return i, false
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				j, ok := skipString(data, i)
				if !ok {
					return j, false
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, false
	}
	// A number or a literal: up to the next delimiter.
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j, j > i
		}
		j++
	}
	return j, j > i
}

// skipString returns the end of the string whose opening quote is at i.
func skipString(data []byte, i int) (int, bool) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return len(data), false
}
