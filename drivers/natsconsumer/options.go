package natsconsumer

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"strings"
)

// Option keys of a natsconsumer cursor block (besides kind and auth).
const (
	// OptStream names the JetStream stream. Required.
	OptStream = "stream"
	// OptConsumer names the durable pull consumer ("durable" is an alias).
	// Defaults to "cursorflow_" + the loop id (characters other than
	// letters, digits, '-' and '_' become '_'): a consumer per loop run.
	// Name one to share a queue across executions.
	OptConsumer = "consumer"
	// OptDurable is an alias of OptConsumer.
	OptDurable = "durable"
	// OptSubject is the consumer's filter subject when the driver creates
	// it; empty means every subject of the stream.
	OptSubject = "subject"
	// OptDeadLetterSubject is where dead-lettered messages are published
	// (a stream must capture it). Empty means dead-lettered messages are
	// only terminated (+TERM).
	OptDeadLetterSubject = "dead_letter_subject"
	// OptURL is the credential when the block has no auth (read by the
	// engine, ignored here).
	OptURL = "url"
)

// Options are the parsed options of a natsconsumer cursor block.
type Options struct {
	// Stream is the stream name.
	Stream string
	// Consumer is the durable consumer name; empty means derived from the
	// loop id.
	Consumer string
	// Subject is the filter subject of a consumer the driver creates.
	Subject string
	// DeadLetterSubject is the subject dead-lettered messages go to.
	DeadLetterSubject string
}

// ParseOptions reads a cursor block's options. Unknown keys are reported
// to logger (when not nil) at warn level and otherwise ignored.
func ParseOptions(opts map[string]any, logger *slog.Logger) (Options, error) {
	var o Options
	var unknown []string
	for k, v := range opts {
		switch k {
		case OptStream, OptConsumer, OptDurable, OptSubject, OptDeadLetterSubject:
			s, ok := v.(string)
			if v != nil && !ok {
				return Options{}, fmt.Errorf("option %q is %T, want a string", k, v)
			}
			s = strings.TrimSpace(s)
			switch k {
			case OptStream:
				o.Stream = s
			case OptConsumer, OptDurable:
				if o.Consumer != "" && s != "" && s != o.Consumer {
					return Options{}, fmt.Errorf("options %q and %q name different consumers", OptConsumer, OptDurable)
				}
				if s != "" {
					o.Consumer = s
				}
			case OptSubject:
				o.Subject = s
			case OptDeadLetterSubject:
				o.DeadLetterSubject = s
			}
		case OptURL:
		default:
			unknown = append(unknown, k)
		}
	}
	if o.Stream == "" {
		return Options{}, fmt.Errorf("option %q is required", OptStream)
	}
	if strings.ContainsAny(o.Stream, " \t.*>/\\") {
		return Options{}, fmt.Errorf("option %q: %q is not a valid stream name", OptStream, o.Stream)
	}
	if o.Consumer != "" && strings.ContainsAny(o.Consumer, " \t.*>/\\") {
		return Options{}, fmt.Errorf("option %q: %q is not a valid consumer name", OptConsumer, o.Consumer)
	}
	if len(unknown) > 0 && logger != nil {
		sort.Strings(unknown)
		logger.Warn("natsconsumer cursor: ignoring unknown cursor options", "options", unknown)
	}
	return o, nil
}

// ConsumerName derives a durable consumer name from a loop id:
// "cursorflow_", the loop id with characters other than letters, digits,
// '-' and '_' replaced by '_' (at most 64 of them), '_' and a hash of the
// whole loop id, so distinct loop ids never share a consumer.
func ConsumerName(loopID string) string {
	var b strings.Builder
	b.WriteString("cursorflow_")
	n := 0
	for _, r := range loopID {
		if n == 64 {
			break
		}
		n++
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	h := fnv.New32a()
	h.Write([]byte(loopID))
	fmt.Fprintf(&b, "_%08x", h.Sum32())
	return b.String()
}
