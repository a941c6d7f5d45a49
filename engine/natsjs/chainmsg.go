package natsjs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/jsonvalid"
)

// headerChain carries the layout of a chained report's body: the length
// of the frame.done's envelope and of its payload, "<envelope> <payload>".
const headerChain = "Cf-Chain"

// A chained report (engine.ChainReporter) travels as one message whose
// body is the frame.done without its payload (JSON), then that payload,
// then the frame.claimed payload of the rows claimed ahead, as they are.
// The payloads are most of the bytes, and neither side reads them:
// encoding them inside one JSON document had both sides check and copy
// them (7% of a NATS frame drain's CPU); now the dispatcher only checks
// that they are JSON, with the event logs' faster check.
func encodeChained(subject string, done eventlog.Event, claimed json.RawMessage) (*nats.Msg, error) {
	payload := done.Payload
	done.Payload = nil
	env, err := json.Marshal(done)
	if err != nil {
		return nil, fmt.Errorf("natsjs: encode chained report: %w", err)
	}
	body := make([]byte, 0, len(env)+len(payload)+len(claimed))
	body = append(append(append(body, env...), payload...), claimed...)
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(headerChain, strconv.Itoa(len(env))+" "+strconv.Itoa(len(payload)))
	return m, nil
}

// errBadChained: a chained report's layout does not match its body.
var errBadChained = errors.New("natsjs: malformed chained report")

// decodeChained reads a message encodeChained made. The payloads it
// returns share m.Data.
func decodeChained(m *nats.Msg) (eventlog.Event, json.RawMessage, error) {
	var done eventlog.Event
	envLen, payLen, ok := strings.Cut(m.Header.Get(headerChain), " ")
	e, err1 := strconv.Atoi(envLen)
	p, err2 := strconv.Atoi(payLen)
	if !ok || err1 != nil || err2 != nil || e <= 0 || p < 0 || e > len(m.Data) || p > len(m.Data)-e {
		return done, nil, fmt.Errorf("%w: layout %q for %d bytes", errBadChained, m.Header.Get(headerChain), len(m.Data))
	}
	if err := json.Unmarshal(m.Data[:e], &done); err != nil {
		return done, nil, fmt.Errorf("%w: %w", errBadChained, err)
	}
	if p > 0 {
		done.Payload = json.RawMessage(m.Data[e : e+p : e+p])
	}
	var claimed json.RawMessage
	if len(m.Data) > e+p {
		claimed = json.RawMessage(m.Data[e+p:])
	}
	// Checked here as a JSON document's members would have been: a bad
	// payload must not reach the orchestrator's batch, which the log
	// would then refuse whole.
	if (done.Payload != nil && !jsonvalid.Valid(done.Payload)) || (claimed != nil && !jsonvalid.Valid(claimed)) {
		return done, nil, fmt.Errorf("%w: a payload is not valid JSON", errBadChained)
	}
	return done, claimed, nil
}
