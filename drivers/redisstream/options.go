package redisstream

import (
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
)

// Option keys of a redisstream cursor block (besides kind and auth).
const (
	// OptStream names the stream key. Required.
	OptStream = "stream"
	// OptGroup names the consumer group. Defaults to "cursorflow:" + the
	// loop id, a group per loop run; name a group to share one queue
	// across executions.
	OptGroup = "group"
	// OptConsumer is the prefix of consumer names; the consumer of frame
	// slot N is "<prefix>-N". Defaults to "slot".
	OptConsumer = "consumer"
	// OptDeadLetterStream names the dead-letter stream. Defaults to
	// "<stream>:dead".
	OptDeadLetterStream = "dead_letter_stream"
	// OptStart is the id a new group starts reading after: "0" (the
	// default: every entry in the stream) or "$" (only entries added
	// later).
	OptStart = "start"
	// OptDeleteAcked, when true, deletes entries (XDEL) as they are
	// acknowledged or dead-lettered, so the stream does not grow without
	// bound.
	OptDeleteAcked = "delete_acked"
	// OptURL is the credential when the block has no auth (read by the
	// engine, ignored here).
	OptURL = "url"
)

// Options are the parsed options of a redisstream cursor block.
type Options struct {
	// Stream is the stream key.
	Stream string
	// Group is the consumer group; empty means derived from the loop id.
	Group string
	// Consumer is the consumer name prefix; defaults to "slot".
	Consumer string
	// DeadLetterStream is the dead-letter stream; defaults to
	// Stream + ":dead".
	DeadLetterStream string
	// Start is where a newly created group starts; defaults to "0".
	Start string
	// DeleteAcked deletes acknowledged and dead-lettered entries.
	DeleteAcked bool
}

// ParseOptions reads a cursor block's options. Unknown keys are reported
// to logger (when not nil) at warn level and otherwise ignored.
func ParseOptions(opts map[string]any, logger *slog.Logger) (Options, error) {
	o := Options{Consumer: "slot", Start: "0"}
	var unknown []string
	for k, v := range opts {
		switch k {
		case OptStream, OptGroup, OptConsumer, OptDeadLetterStream, OptStart:
			s, err := optString(k, v)
			if err != nil {
				return Options{}, err
			}
			switch k {
			case OptStream:
				o.Stream = s
			case OptGroup:
				o.Group = s
			case OptConsumer:
				if s != "" {
					o.Consumer = s
				}
			case OptDeadLetterStream:
				o.DeadLetterStream = s
			case OptStart:
				if s != "" {
					o.Start = s
				}
			}
		case OptDeleteAcked:
			b, err := optBool(k, v)
			if err != nil {
				return Options{}, err
			}
			o.DeleteAcked = b
		case OptURL:
		default:
			unknown = append(unknown, k)
		}
	}
	if o.Stream == "" {
		return Options{}, fmt.Errorf("option %q is required", OptStream)
	}
	if o.DeadLetterStream == "" {
		o.DeadLetterStream = o.Stream + ":dead"
	}
	if o.DeadLetterStream == o.Stream {
		return Options{}, fmt.Errorf("option %q must differ from %q", OptDeadLetterStream, OptStream)
	}
	if len(unknown) > 0 && logger != nil {
		sort.Strings(unknown)
		logger.Warn("redisstream cursor: ignoring unknown cursor options", "options", unknown)
	}
	return o, nil
}

func optString(name string, v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(v), nil
	case int64, int, float64:
		return fmt.Sprint(v), nil
	}
	return "", fmt.Errorf("option %q is %T, want a string", name, v)
}

func optBool(name string, v any) (bool, error) {
	switch v := v.(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return false, fmt.Errorf("option %q is %q, want true or false", name, v)
		}
		return b, nil
	}
	return false, fmt.Errorf("option %q is %T, want a bool", name, v)
}
