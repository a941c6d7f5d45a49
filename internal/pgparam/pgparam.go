// Package pgparam encodes the values a playbook binds to a PostgreSQL
// statement's parameters ($1, $2, ...), for the postgres tool and the
// postgres cursor driver alike: each as text, typed by the server from
// the statement, so results decode exactly as without parameters.
package pgparam

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Encode returns the text form of each value: nil is NULL; strings are as
// they are; integers, floats and booleans their text; lists and maps their
// JSON (cast with $n::jsonb). A string with a NUL byte is an error:
// PostgreSQL text cannot hold one.
func Encode(values []any) ([][]byte, error) {
	out := make([][]byte, len(values))
	for i, v := range values {
		switch x := v.(type) {
		case nil:
			out[i] = nil
		case string:
			if strings.IndexByte(x, 0) >= 0 {
				return nil, fmt.Errorf("$%d: PostgreSQL text cannot hold a NUL byte", i+1)
			}
			out[i] = []byte(x)
		case bool:
			out[i] = []byte(strconv.FormatBool(x))
		case int:
			out[i] = []byte(strconv.Itoa(x))
		case int64:
			out[i] = []byte(strconv.FormatInt(x, 10))
		case float64:
			out[i] = []byte(strconv.FormatFloat(x, 'g', -1, 64))
		default:
			b, err := json.Marshal(x)
			if err != nil {
				return nil, fmt.Errorf("$%d: %w", i+1, err)
			}
			out[i] = b
		}
	}
	return out, nil
}
