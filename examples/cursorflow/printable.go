package main

import (
	"fmt"
	"strings"
	"unicode"
)

// printable returns s with its control characters (C0, DEL and C1:
// escape sequences, bell, carriage return, newline) written as Go escapes
// (\x1b, \u009b), for printing on a terminal. Step names, row keys and
// errors come from playbooks and from what their tools reached (an HTTP
// body, a database message): printed as they are, an escape sequence in
// them would retitle, clear or rewrite the operator's terminal, and a
// newline would forge a line of output.
func printable(s string) string {
	return escapeControls(s, false)
}

// printableText is printable keeping newlines and tabs: for an error
// message, which may span lines (a traceback).
func printableText(s string) string {
	return escapeControls(s, true)
}

func escapeControls(s string, keepLines bool) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
