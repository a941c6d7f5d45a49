package natsconsumer_test

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cursorflow/cursorflow/drivers/internal/deadtest"
	"github.com/cursorflow/cursorflow/drivers/natsconsumer"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/drivertest"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

const playbookFile = "../../examples/playbooks/natsconsumer_drain.yaml"

// TestPlaybookDrains runs examples/playbooks/natsconsumer_drain.yaml
// through the engine against a 10,000-message stream with 4 frame slots
// and checks that every message was processed and acknowledged exactly
// once.
func TestPlaybookDrains(t *testing.T) {
	const n = 10000
	_, js, base := admin(t)
	name := "E2E_" + testenv.RandomSuffix(t)
	seqs := newStreams(t, js, name, n)
	const consumer = "drain"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: playbookFile,
		Kind:         "natsconsumer",
		Driver:       natsconsumer.New(natsconsumer.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"nats_queue": base}),
		Workload: map[string]any{
			"stream": name, "subject": name + ".jobs", "consumer": consumer, "dead_letter_subject": name + ".dead",
		},
	})

	// The source: every message delivered once and acknowledged.
	c, err := js.Consumer(ctx, name, consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 ||
		info.Delivered.Stream != n || info.AckFloor.Stream != n {
		t.Fatalf("consumer: pending %d, ack pending %d, redelivered %d, delivered %d, ack floor %d; want 0, 0, 0, %d, %d",
			info.NumPending, info.NumAckPending, info.NumRedelivered, info.Delivered.Stream, info.AckFloor.Stream, n, n)
	}
	if dead := deadLettered(t, js, name+"_DEAD"); len(dead) != 0 {
		t.Fatalf("%d messages dead-lettered, want none", len(dead))
	}
	// The engine: every message ran through the body once, successfully.
	drivertest.ExpectEachOnceOK(t, r.Events, seqs)
	if ls := r.Loop; ls.OK != n || !ls.Finished {
		t.Fatalf("loop status %+v, want %d rows ok and finished", ls, n)
	}
	r.LogRate(t, n, "messages")
}

// TestPlaybookCountsDeadMessages drains messages whose body fails for
// every 50th (deadtest.Drain): each of those fails max_attempts times and
// is then dead-lettered by the claim of its next delivery, which the loop
// must count as dead, one row each, beside the dead-letter stream.
func TestPlaybookCountsDeadMessages(t *testing.T) {
	_, js, base := admin(t)
	name := "E2E_DEAD_" + testenv.RandomSuffix(t)
	seqs := newStreams(t, js, name, deadtest.Rows)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	deadtest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/dead_drain.yaml",
		Kind:         "natsconsumer",
		Driver:       natsconsumer.New(natsconsumer.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"nats_queue": base}),
		Workload:     map[string]any{"stream": name, "dead_letter_subject": name + ".dead"},
	}, seqs, func() []string { return deadLettered(t, js, name+"_DEAD") })
}

// TestPlaybookDefaultConsumerPerExecution drains a stream twice with a
// playbook that names no consumer: each execution's loop gets a durable
// consumer of its own and reads the whole stream, rather than continue
// the consumer of an earlier execution whose loop had the same run id
// (start#1).
func TestPlaybookDefaultConsumerPerExecution(t *testing.T) {
	const n = 25
	_, js, base := admin(t)
	name := "E2E_DEFAULT_" + testenv.RandomSuffix(t)
	seqs := newStreams(t, js, name, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for run := 1; run <= 2; run++ {
		r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
			PlaybookFile: "testdata/default_consumer_drain.yaml",
			Kind:         "natsconsumer",
			Driver:       natsconsumer.New(natsconsumer.Config{}),
			Keychain:     tools.StaticURLs(map[string]string{"nats_queue": base}),
			Workload:     map[string]any{"stream": name},
			Shutdown:     true,
		})
		drivertest.ExpectEachOnceOK(t, r.Events, seqs)
		if ls := r.Loop; ls.OK != n || !ls.Finished {
			t.Fatalf("run %d: loop status %+v, want %d rows ok and finished", run, ls, n)
		}
		// Each execution's consumer is gone once its loop is done: a
		// stream drained by every execution does not collect a consumer
		// per run on the server.
		if consumers := consumerNames(t, js, name); len(consumers) != 0 {
			t.Fatalf("run %d: consumers %v left behind, want none", run, consumers)
		}
	}
}

// TestPlaybookFinish drains a stream through a durable consumer the
// driver names and then through one the playbook names: once the
// execution completed, the first is deleted (cursor.Finisher) and the
// second, which other executions may share, is left as it is.
func TestPlaybookFinish(t *testing.T) {
	const n = 25
	_, js, base := admin(t)
	name := "E2E_FINISH_" + testenv.RandomSuffix(t)
	newStreams(t, js, name, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/finish_drain.yaml",
		Kind:         "natsconsumer",
		Driver:       natsconsumer.New(natsconsumer.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"nats_queue": base}),
		Workload:     map[string]any{"stream": name, "consumer": "named"},
		Shutdown:     true,
	})
	for _, run := range []string{"start#1", "named#1"} {
		if ls := r.Status.Loops[run]; ls.OK != n || !ls.Finished {
			t.Fatalf("loop %s: status %+v, want %d rows ok and finished", run, ls, n)
		}
	}
	if consumers := consumerNames(t, js, name); !reflect.DeepEqual(consumers, []string{"named"}) {
		t.Fatalf("consumers %v, want [named]: the driver's own consumer deleted, the playbook's kept", consumers)
	}
}

// TestPlaybookFinishAfterCancel cancels an execution in the middle of a
// loop whose durable consumer the driver names: a cancelled execution is
// never resumed, so its loop's consumer goes although the loop never got
// to loop.done.
func TestPlaybookFinishAfterCancel(t *testing.T) {
	_, js, base := admin(t)
	name := "E2E_CANCEL_" + testenv.RandomSuffix(t)
	newStreams(t, js, name, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	r := drivertest.Cancelled(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/interrupted_drain.yaml",
		Kind:         "natsconsumer",
		Driver:       natsconsumer.New(natsconsumer.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"nats_queue": base}),
		Workload:     map[string]any{"stream": name},
		Shutdown:     true,
	})
	if r.Summary.Status != engine.StatusCancelled {
		t.Fatalf("execution %s, want cancelled", r.Summary.Status)
	}
	if consumers := consumerNames(t, js, name); len(consumers) != 0 {
		t.Fatalf("consumers %v left behind by the cancelled execution, want none", consumers)
	}
}

// TestPlaybookFinishAfterResume closes the engine in the middle of a loop
// whose durable consumer the driver names: the consumer must still be
// there, with the delivered messages, for the engine that resumes the
// execution, and gone once that one has finished the loop.
func TestPlaybookFinishAfterResume(t *testing.T) {
	const n = 20
	_, js, base := admin(t)
	name := "E2E_RESUME_" + testenv.RandomSuffix(t)
	seqs := newStreams(t, js, name, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	r := drivertest.Interrupted(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/interrupted_drain.yaml",
		Kind:         "natsconsumer",
		Driver:       natsconsumer.New(natsconsumer.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"nats_queue": base}),
		Workload:     map[string]any{"stream": name},
		Shutdown:     true,
	}, func() {
		consumers := consumerNames(t, js, name)
		if len(consumers) != 1 || !strings.HasPrefix(consumers[0], "cursorflow_") {
			t.Fatalf("after the interruption: consumers %v, want the loop's own", consumers)
		}
		c, err := js.Consumer(ctx, name, consumers[0])
		if err != nil {
			t.Fatal(err)
		}
		if info, err := c.Info(ctx); err != nil || info.Delivered.Stream == 0 {
			t.Fatalf("after the interruption: consumer delivered up to %v (err %v), want the claimed messages", info.Delivered.Stream, err)
		}
	})
	if r.Summary.Status != engine.StatusCompleted {
		t.Fatalf("resumed execution %s: %s %s", r.Summary.Status, r.Summary.Field, r.Summary.Error)
	}
	items := drivertest.FrameItems(t, r.Events)
	for _, k := range seqs {
		if !slices.Contains(items[k], engine.OutcomeOK) {
			t.Fatalf("message %s: outcomes %v, want one ok (a body cut short by the close runs again)", k, items[k])
		}
	}
	if consumers := consumerNames(t, js, name); len(consumers) != 0 {
		t.Fatalf("consumers %v left behind by the resumed execution, want none", consumers)
	}
}

// consumerNames returns the names of stream's consumers, sorted.
func consumerNames(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	st, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	lister := st.ConsumerNames(context.Background())
	for n := range lister.Name() {
		names = append(names, n)
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestPlaybookBinaryPayloads drains messages whose payload is not valid
// UTF-8, one of them a JSON object: the body must be given the payload in
// base64 with data_base64 set, as the SQL drivers give binary columns, and
// the claim must record the same value, so that a frame re-issued from
// the log runs on what the first run saw (raw bytes reached the body,
// which sql_literal refused, and were recorded with U+FFFD in their
// place; the JSON object decoded with U+FFFD). Valid UTF-8 text stays as
// it is.
func TestPlaybookBinaryPayloads(t *testing.T) {
	_, js, base := admin(t)
	name := "E2E_BINARY_" + testenv.RandomSuffix(t)
	newStreams(t, js, name, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seqs []string
	for _, p := range []string{"bin\xff\xfeok\x80", `{"s": "` + "\xff" + `"}`, "café ☃"} {
		ack, err := js.Publish(ctx, name+".jobs", []byte(p))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, strconv.FormatUint(ack.Sequence, 10))
	}

	var bodies drivertest.Bodies
	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/binary_drain.yaml",
		Kind:         "natsconsumer",
		Driver:       natsconsumer.New(natsconsumer.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"nats_queue": base}),
		Workload:     map[string]any{"stream": name},
		Tools:        map[string]tools.Tool{"body": bodies.Tool()},
	})
	drivertest.ExpectEachOnceOK(t, r.Events, seqs)

	// Sorted as drivertest sorts them.
	wantData := []any{"Ymlu//5va4A=", "café ☃", "eyJzIjogIv8ifQ=="}
	if got := bodies.Values("data"); !reflect.DeepEqual(got, wantData) {
		t.Errorf("the body was given data %q, want %q", got, wantData)
	}
	if got := drivertest.ClaimedValues(t, r.Events, "data"); !reflect.DeepEqual(got, wantData) {
		t.Errorf("frame.claimed recorded data %q, want %q", got, wantData)
	}
	wantLiteral := []any{"'Ymlu//5va4A='", "'café ☃'", "'eyJzIjogIv8ifQ=='"}
	if got := bodies.Values("data_literal"); !reflect.DeepEqual(got, wantLiteral) {
		t.Errorf("the body quoted data as %q, want %q", got, wantLiteral)
	}
	if got, want := bodies.Values("data_base64"), []any{false, true, true}; !reflect.DeepEqual(got, want) {
		t.Errorf("the body was given data_base64 %v, want %v", got, want)
	}
}

// TestPlaybookBigIntegerIDs drains messages whose JSON ids do not fit an
// int64 (a uint64 id, a 30-digit number) into a numeric column: the
// stored id must be the message's, digit for digit, whether the body
// writes it as rendered or as an SQL literal. The payload's decoding made
// such an id a float64, so 18446744073709551615 was stored as
// 18446744073709552000 and a statement that picked a row by it matched
// another row or none. An id that fits an int64 is unchanged.
func TestPlaybookBigIntegerIDs(t *testing.T) {
	_, js, base := admin(t)
	name := "E2E_BIGID_" + testenv.RandomSuffix(t)
	newStreams(t, js, name, 0)
	sink := testenv.PostgresSchema(t)
	testenv.Exec(t, sink, `CREATE TABLE sink (name text PRIMARY KEY, id numeric, id_literal numeric, id_json jsonb)`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := map[string]string{
		"uint64": "18446744073709551615",
		"big":    "123456789012345678901234567890",
		"round":  "10000000000000000000",
		"int64":  "9223372036854775807",
	}
	var seqs []string
	for label, id := range ids {
		ack, err := js.Publish(ctx, name+".jobs", []byte(`{"name": "`+label+`", "id": `+id+`}`))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, strconv.FormatUint(ack.Sequence, 10))
	}

	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/bigid_drain.yaml",
		Kind:         "natsconsumer",
		Driver:       natsconsumer.New(natsconsumer.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"nats_queue": base, "sink_db": sink}),
		Workload:     map[string]any{"stream": name, "table": "sink"},
	})
	drivertest.ExpectEachOnceOK(t, r.Events, seqs)
	for label, id := range ids {
		var stored, literal, inJSON string
		testenv.QueryRow(t, sink, `SELECT id::text, id_literal::text, id_json->>'id' FROM sink WHERE name = '`+label+`'`,
			&stored, &literal, &inJSON)
		if stored != id || literal != id || inJSON != id {
			t.Errorf("message %s with id %s: stored id %s, as a literal %s, in tojson %s", label, id, stored, literal, inJSON)
		}
	}
}

// TestPlaybookHeaders drains messages with and without headers: a body
// reads a message's headers as iter.msg.headers, {name: value} with a
// name set more than once joined with ", ", and the claim records them
// with the rest of the row, so a frame re-run from the log sees them too.
// A message without headers has no headers value, and a JSON payload's
// own headers field is kept. The driver gave the payload alone.
func TestPlaybookHeaders(t *testing.T) {
	_, js, base := admin(t)
	name := "E2E_HEADERS_" + testenv.RandomSuffix(t)
	newStreams(t, js, name, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seqs []string
	for _, m := range []*nats.Msg{
		{Data: []byte(`{"name": "traced"}`), Header: nats.Header{"Trace-Id": {"t-1"}, "Tag": {"a", "b"}}},
		{Data: []byte(`plain`), Header: nats.Header{"Trace-Id": {"t-2"}, "Bad": {"x\xffy"}}},
		{Data: []byte(`{"name": "bare"}`)},
		{Data: []byte(`{"name": "own", "headers": {"Trace-Id": "from-payload"}}`), Header: nats.Header{"Trace-Id": {"t-4"}}},
	} {
		m.Subject = name + ".jobs"
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, strconv.FormatUint(ack.Sequence, 10))
	}

	var bodies drivertest.Bodies
	r := drivertest.Drain(ctx, t, drivertest.DrainConfig{
		PlaybookFile: "testdata/headers_drain.yaml",
		Kind:         "natsconsumer",
		Driver:       natsconsumer.New(natsconsumer.Config{}),
		Keychain:     tools.StaticURLs(map[string]string{"nats_queue": base}),
		Workload:     map[string]any{"stream": name},
		Tools:        map[string]tools.Tool{"body": bodies.Tool()},
	})
	drivertest.ExpectEachOnceOK(t, r.Events, seqs)

	// Sorted by their fmt form, as drivertest sorts them.
	if got, want := bodies.Values("trace"), []any{"from-payload", "none", "t-1", "t-2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the bodies read Trace-Id %q, want %q", got, want)
	}
	wantJSON := []any{`{"Bad": "x` + "\uFFFD" + `y", "Trace-Id": "t-2"}`, `{"Tag": "a, b", "Trace-Id": "t-1"}`, `{"Trace-Id": "from-payload"}`, `{}`}
	if got := bodies.Values("headers"); !reflect.DeepEqual(got, wantJSON) {
		t.Errorf("the bodies were given headers %q, want %q", got, wantJSON)
	}
	wantClaimed := []any{
		nil,
		map[string]any{"Bad": "x\uFFFDy", "Trace-Id": "t-2"},
		map[string]any{"Tag": "a, b", "Trace-Id": "t-1"},
		map[string]any{"Trace-Id": "from-payload"},
	}
	if got := drivertest.ClaimedValues(t, r.Events, "headers"); !reflect.DeepEqual(got, wantClaimed) {
		t.Errorf("frame.claimed recorded headers %#v, want %#v", got, wantClaimed)
	}
}
