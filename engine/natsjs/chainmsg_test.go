package natsjs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cursorflow/cursorflow/eventlog"
)

// TestChainedReportLayout: a chained report comes out of its message as
// it went in, payloads byte for byte (absent ones absent), and a message
// whose layout does not fit its body is refused, not sliced out of range.
func TestChainedReportLayout(t *testing.T) {
	done := eventlog.Event{ExecutionID: "e1", Type: eventlog.TypeFrameDone, Step: "s", CommandID: "r/s0.f1@1",
		Attempt: 1, Frame: 1, WorkerID: "w1", Time: time.Unix(1700000000, 0).UTC(),
		Payload: json.RawMessage(`{"items":[{"key":"1","outcome":"ok","ms":2}],"counts":{"rows":1,"ok":1,"failed":0,"dead":0}}`)}
	claimed := json.RawMessage(`{"rows":[{"key":"2","values":{"id":2}}]}`)
	for _, tc := range []struct {
		name    string
		payload json.RawMessage
		claimed json.RawMessage
	}{{"both", done.Payload, claimed}, {"no payload", nil, claimed}, {"no claim", done.Payload, nil}} {
		in := done
		in.Payload = tc.payload
		m, err := encodeChained("p.chain", in, tc.claimed)
		if err != nil {
			t.Fatal(err)
		}
		got, gotClaimed, err := decodeChained(m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !bytes.Equal(got.Payload, tc.payload) || !bytes.Equal(gotClaimed, tc.claimed) || (got.Payload == nil) != (tc.payload == nil) {
			t.Fatalf("%s: payload %s, claimed %s", tc.name, got.Payload, gotClaimed)
		}
		got.Payload, in.Payload = nil, nil
		if !got.Time.Equal(in.Time) {
			t.Fatalf("%s: time %v, want %v", tc.name, got.Time, in.Time)
		}
		got.Time, in.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("%s: %+v, want %+v", tc.name, got, in)
		}
	}
	m, _ := encodeChained("p.chain", done, claimed)
	env := len(m.Data) - len(done.Payload) - len(claimed)
	for _, layout := range []string{"", "12", "x 3", "0 0", "-1 0", "10 -1", "100000 0", "3 100000", "3 0",
		// the claim cut short, the payload run into the claim
		fmt.Sprintf("%d %d", env, len(done.Payload)-1), fmt.Sprintf("%d %d", env, len(done.Payload)+1)} {
		bad := nats.NewMsg("p.chain")
		bad.Data, bad.Header = m.Data, nats.Header{}
		bad.Header.Set(headerChain, layout)
		if _, _, err := decodeChained(bad); !errors.Is(err, errBadChained) {
			t.Fatalf("layout %q: %v, want errBadChained", layout, err)
		}
	}
}
