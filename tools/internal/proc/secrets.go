package proc

import (
	"strings"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/conv"
)

// Secrets returns the secrets revealed to a call (tools.Call.Revealed),
// the empty ones left out.
func Secrets(revealed []tools.Revealed) []string {
	var s []string
	for _, r := range revealed {
		if r.Secret != "" {
			s = append(s, r.Secret)
		}
	}
	return s
}

// secretStart returns the length of the longest suffix of b that is the
// start, but not the whole, of one of secrets: what a cut through a
// secret left of it, which tools.ConcealSecrets cannot recognise.
func secretStart(b []byte, secrets []string) int {
	n := 0
	for _, s := range secrets {
		for k := min(len(s)-1, len(b)); k > n; k-- {
			if string(b[len(b)-k:]) == s[:k] {
				n = k
				break
			}
		}
	}
	return n
}

// CutOutput returns what c kept, without the start of a secret it ends
// in when c dropped bytes: output cut in the middle of a secret would
// keep the secret's first part, which the worker's concealing
// (tools.ConcealSecrets) cannot recognise. Whole secrets are left for
// the worker to conceal.
func CutOutput(c *Capped, secrets []string) string {
	b := c.Bytes()
	if c.Dropped > 0 {
		b = b[:len(b)-secretStart(b, secrets)]
	}
	return string(b)
}

// Quote returns s, with the revealed secrets concealed
// (tools.ConcealSecrets), cut to about n bytes for an error message.
// Concealing comes first: a cut through a secret would leave its first
// part, which concealing cannot recognise afterwards.
func Quote(s string, revealed []tools.Revealed, n int) string {
	if len(revealed) > 0 {
		s, _ = tools.ConcealSecrets(s, revealed).(string)
	}
	return conv.Truncate(strings.TrimSpace(s), n)
}
