package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/internal/plainjson"
)

// Command kinds.
const (
	KindStep  = "step"  // run a step's tool chain once
	KindItem  = "item"  // run the chain for one item of a collection loop
	KindFrame = "frame" // claim a frame of a cursor loop and run the chain on it
	KindShard = "shard" // run the chain once on a fan-out loop's shard of items
)

// startedPayload is execution.started's payload: everything a fresh process
// needs to rebuild and resume the execution, secrets excluded.
type startedPayload struct {
	// Playbook is the playbook source, so resume needs nothing but the log.
	Playbook string         `json:"playbook"`
	File     string         `json:"file,omitempty"`
	Workload map[string]any `json:"workload"`
	Vars     map[string]any `json:"vars,omitempty"`
	Parent   string         `json:"parent,omitempty"`
	// Semantics is the rule set the execution runs under (join.go); old
	// histories have none and replay as they were recorded.
	Semantics int `json:"semantics,omitempty"`
}

// issuedPayload is command.issued's payload.
type issuedPayload struct {
	Kind string `json:"kind"`
	// Run is the step run the command belongs to ("step#n").
	Run string `json:"run"`
	// Base identifies the unit of work across its attempts.
	Base string         `json:"base"`
	Args map[string]any `json:"args,omitempty"`
	// Index is the item index (item commands); Count, in a chunked loop,
	// how many items from Index the command runs.
	Index int `json:"index,omitempty"`
	Count int `json:"count,omitempty"`
	// Slot and Frame number frames of a cursor loop.
	Slot int `json:"slot,omitempty"`
	// StartTask and Carry resume a pipeline at a task after a retry.
	StartTask   int            `json:"start_task,omitempty"`
	TaskAttempt int            `json:"task_attempt,omitempty"`
	Carry       map[string]any `json:"carry,omitempty"`
	// NextCall overrides the configuration of the task at StartTask: the
	// next page of a paginating retry.
	NextCall map[string]any `json:"next_call,omitempty"`
	// Rows are a re-issued frame's claimed rows (from frame.claimed), and
	// Buried the keys of the rows its claim set aside.
	Rows   []FrameRow `json:"rows,omitempty"`
	Buried []string   `json:"buried,omitempty"`
	// Reason says why a command was re-issued (lease, retry, resume).
	Reason string `json:"reason,omitempty"`
	// Settle and SettleReason: see Command.Settle.
	Settle       string `json:"settle,omitempty"`
	SettleReason string `json:"settle_reason,omitempty"`
	// Joined lists the other wanted entries of the step that this run
	// took with it (the join barrier).
	Joined []string `json:"joined,omitempty"`
	// HoldMs, on a frame whose slot's last claim found no rows during a
	// hold (loopState.HoldUntil), is how long the frame waits before it
	// claims (Command.Hold).
	HoldMs int64 `json:"hold_ms,omitempty"`
	// HoldDrain, on a frame issued again on a resume, says that the
	// attempt it supersedes ran on a worker elsewhere, which outlives the
	// process that drove it and may hold a claim it could not record: the
	// loop's drain is held as after a lost attempt (State.holdDrain).
	HoldDrain bool `json:"hold_drain,omitempty"`
}

// Settle actions of a re-issued frame (Command.Settle).
const (
	// SettleDeadLetter: hand the frame's recorded rows to the cursor's
	// dead letter (cursor.DeadLetterer) and report them dead.
	SettleDeadLetter = "dead_letter"
	// SettleRelease: the execution is being cancelled; hand the recorded
	// rows back to the source (Release), or run them where the source
	// cannot take them back.
	SettleRelease = "release"
)

// FrameRow is a claimed row as recorded in frame.claimed.
type FrameRow struct {
	Key     string         `json:"key"`
	Values  map[string]any `json:"values"`
	Attempt int            `json:"attempt,omitempty"`
	Token   string         `json:"token,omitempty"`
}

// MarshalJSON encodes the row exactly as encoding/json does from its
// tags, writing the values without reflection (internal/plainjson): a
// frame's claim records every row's values.
func (r FrameRow) MarshalJSON() ([]byte, error) { return r.appendJSON(make([]byte, 0, 64)) }

func (r FrameRow) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"key":`...)
	b = plainjson.AppendString(b, r.Key)
	b = append(b, `,"values":`...)
	b, err := plainjson.Append(b, r.Values)
	if err != nil {
		return nil, err
	}
	if r.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(r.Attempt), 10)
	}
	if r.Token != "" {
		b = append(b, `,"token":`...)
		b = plainjson.AppendString(b, r.Token)
	}
	return append(b, '}'), nil
}

// jsonAppender is a payload that encodes itself exactly as encoding/json
// does from its tags, without reflection and without encoding/json
// checking and compacting the output of every row's MarshalJSON: a
// frame's claim and outcome carry one entry per row (mustJSON).
type jsonAppender interface {
	appendJSON(b []byte) ([]byte, error)
}

// completedPayload is command.completed's and command.failed's payload.
type completedPayload struct {
	Output map[string]any `json:"output"`
	// Ctx and Vars are assignments made by the chain (task/policy set).
	Ctx  map[string]any `json:"ctx,omitempty"`
	Vars map[string]any `json:"vars,omitempty"`
	// Jump names a step a policy jumped to.
	Jump string `json:"jump,omitempty"`
	// Error fields for command.failed.
	Error string `json:"error,omitempty"`
	Task  string `json:"task,omitempty"`
	Field string `json:"field,omitempty"`
	// Retry asks for a durable retry (command.failed only).
	Retry *retryRequest `json:"retry,omitempty"`
	// Ms is the command's run time in milliseconds.
	Ms int64 `json:"ms,omitempty"`
	// Outputs are a chunk's item outputs, in order (Output is the last).
	Outputs []map[string]any `json:"outputs,omitempty"`
}

type retryRequest struct {
	StartTask   int            `json:"start_task"`
	TaskAttempt int            `json:"task_attempt"`
	Delay       float64        `json:"delay"`
	Carry       map[string]any `json:"carry,omitempty"`
	// Paging marks a page of a paginating retry that succeeded (reported
	// with command.completed): Page is what it contributes to the gathered
	// result, NextCall the next page's overrides.
	Paging   bool           `json:"paging,omitempty"`
	Page     any            `json:"page,omitempty"`
	NextCall map[string]any `json:"next_call,omitempty"`
}

// awaitingPayload is command.awaiting's payload: the execution awaited
// and where the chain picks up when it has ended.
type awaitingPayload struct {
	ExecutionID string         `json:"execution_id"`
	StartTask   int            `json:"start_task"`
	TaskAttempt int            `json:"task_attempt"`
	Carry       map[string]any `json:"carry,omitempty"`
	NextCall    map[string]any `json:"next_call,omitempty"`
	Ms          int64          `json:"ms,omitempty"`
}

// awaitDonePayload is await.done's payload.
type awaitDonePayload struct {
	Base        string `json:"base"`
	ExecutionID string `json:"execution_id"`
	Status      string `json:"status"`
}

// retryPayload is retry.scheduled's payload.
type retryPayload struct {
	Run         string         `json:"run"`
	Base        string         `json:"base"`
	Due         time.Time      `json:"due"`
	StartTask   int            `json:"start_task"`
	TaskAttempt int            `json:"task_attempt"`
	Carry       map[string]any `json:"carry,omitempty"`
	NextCall    map[string]any `json:"next_call,omitempty"`
}

// frameClaimedPayload is frame.claimed's payload.
type frameClaimedPayload struct {
	Rows []FrameRow `json:"rows"`
	// Buried are the keys of rows the source set aside while claiming
	// (cursor.Claim.Dead): committed with the claim, so a re-issued frame
	// reports them dead in place of the attempt that claimed them.
	Buried []string `json:"buried,omitempty"`
}

// frameClaimedRaw is what the fold keeps of a frame.claimed: the rows as
// recorded, decoded only if the frame is re-issued, and the buried keys.
type frameClaimedRaw struct {
	Rows   json.RawMessage `json:"rows"`
	Buried []string        `json:"buried,omitempty"`
}

// ItemOutcome is one row's outcome inside frame.done.
type ItemOutcome struct {
	Key     string `json:"key"`
	Outcome string `json:"outcome"` // ok, error, dead
	Ms      int64  `json:"ms"`
	Error   string `json:"error,omitempty"`
}

// Row outcomes.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
	OutcomeDead  = "dead"
)

// frameDonePayload is frame.done's payload.
type frameDonePayload struct {
	Drained bool          `json:"drained,omitempty"`
	Items   []ItemOutcome `json:"items,omitempty"`
	// Counts summarises Items, so folding a frame.done need not decode
	// every row's outcome.
	Counts   frameCounts    `json:"counts"`
	Ctx      map[string]any `json:"ctx,omitempty"`
	Fail     string         `json:"fail,omitempty"`
	Ms       int64          `json:"ms,omitempty"`
	Released int            `json:"released,omitempty"`
	// Returned counts the rows among Released that went back without an
	// outcome, so they are not in Items: never started (a cancel, a
	// worker stopping, a frame out of time or past max_bytes) or cut
	// short by the worker stopping. The others are failed rows, or rows
	// whose ack failed, with their outcome in Items.
	Returned int `json:"returned,omitempty"`
	// Cancelled: the worker saw the execution being cancelled (or was
	// stopped itself) and stopped before running every row (the rest
	// were released).
	Cancelled bool `json:"cancelled,omitempty"`
	// ClaimOpenUs is how long, in microseconds, the frame's claim stayed
	// pending between the claim and its commit: the record's round trip.
	ClaimOpenUs int64 `json:"claim_open_us,omitempty"`
	// Abandoned lists the keys of recorded rows that the engine gave up
	// on without the source settling them (the attempt that was to
	// dead-letter or release them was lost): the source may still hold
	// them claimed.
	Abandoned []string `json:"abandoned,omitempty"`
	// Unreleased lists the keys of failed rows that the cursor could not
	// hand back because it has no release statement: they stay claimed in
	// the source, by the playbook's design (validate warns of it), for
	// its own SQL to deal with. Unlike Abandoned, nothing went wrong:
	// they only count in the loop's rows left claimed (LoopStatus).
	Unreleased []string `json:"unreleased,omitempty"`
	// Lost: the engine gave the frame up after its lease ran out too
	// often, without recorded rows; what its attempts claimed unrecorded
	// is the source's to take back (State.holdDrain).
	Lost bool `json:"lost,omitempty"`
	// Exclusive: the frame's source runs one claim at a time
	// (cursor.Features.ExclusiveClaim), so a claim that finds nothing
	// proves that no lost attempt holds rows unrecorded: its loop needs
	// no hold after a loss (State.holdDrain), and a drained frame drains
	// its slot even within one.
	Exclusive bool `json:"exclusive,omitempty"`
}

// returned counts n rows handed back without an outcome: in Released, and
// in Returned.
func (p *frameDonePayload) returned(n int) {
	p.Released += n
	p.Returned += n
}

func (p frameClaimedPayload) appendJSON(b []byte) ([]byte, error) {
	if p.Rows == nil {
		b = append(b, `{"rows":null`...)
	} else {
		b = append(slices.Grow(b, 128), `{"rows":[`...)
		first := len(b)
		for i, r := range p.Rows {
			if i > 0 {
				if i == 1 {
					// A claim's rows are alike: one growth, sized on the
					// first row with an eighth to spare, not a dozen.
					b = slices.Grow(b, (len(b)-first+1)*(len(p.Rows)-1)*9/8+64)
				}
				b = append(b, ',')
			}
			var err error
			if b, err = r.appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = appendStrings(b, "buried", p.Buried)
	return append(b, '}'), nil
}

// appendStrings appends ,"name":[list...] to an object being encoded,
// nothing when list is empty.
func appendStrings(b []byte, name string, list []string) []byte {
	if len(list) == 0 {
		return b
	}
	b = append(b, `,"`+name+`":[`...)
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = plainjson.AppendString(b, s)
	}
	return append(b, ']')
}

func (p frameDonePayload) appendJSON(b []byte) ([]byte, error) {
	b = slices.Grow(b, 48*len(p.Items)+192) // {"key":"…","outcome":"ok","ms":3} an item
	b = append(b, '{')
	if p.Drained {
		b = append(b, `"drained":true,`...)
	}
	if len(p.Items) > 0 {
		b = append(b, `"items":[`...)
		for i, it := range p.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"key":`...)
			b = plainjson.AppendString(b, it.Key)
			b = append(b, `,"outcome":`...)
			b = plainjson.AppendString(b, it.Outcome)
			b = append(b, `,"ms":`...)
			b = strconv.AppendInt(b, it.Ms, 10)
			if it.Error != "" {
				b = append(b, `,"error":`...)
				b = plainjson.AppendString(b, it.Error)
			}
			b = append(b, '}')
		}
		b = append(b, "],"...)
	}
	c := p.Counts
	b = append(b, `"counts":{"rows":`...)
	b = strconv.AppendInt(b, int64(c.Rows), 10)
	b = append(b, `,"ok":`...)
	b = strconv.AppendInt(b, int64(c.OK), 10)
	b = append(b, `,"failed":`...)
	b = strconv.AppendInt(b, int64(c.Failed), 10)
	b = append(b, `,"dead":`...)
	b = strconv.AppendInt(b, int64(c.Dead), 10)
	b = append(b, '}')
	if len(p.Ctx) > 0 {
		b = append(b, `,"ctx":`...)
		var err error
		if b, err = plainjson.Append(b, p.Ctx); err != nil {
			return nil, err
		}
	}
	if p.Fail != "" {
		b = append(b, `,"fail":`...)
		b = plainjson.AppendString(b, p.Fail)
	}
	for _, f := range []struct {
		name string
		n    int64
	}{{"ms", p.Ms}, {"released", int64(p.Released)}, {"returned", int64(p.Returned)}} {
		if f.n != 0 {
			b = append(b, `,"`+f.name+`":`...)
			b = strconv.AppendInt(b, f.n, 10)
		}
	}
	if p.Cancelled {
		b = append(b, `,"cancelled":true`...)
	}
	if p.ClaimOpenUs != 0 {
		b = append(b, `,"claim_open_us":`...)
		b = strconv.AppendInt(b, p.ClaimOpenUs, 10)
	}
	b = appendStrings(b, "abandoned", p.Abandoned)
	b = appendStrings(b, "unreleased", p.Unreleased)
	if p.Lost {
		b = append(b, `,"lost":true`...)
	}
	if p.Exclusive {
		b = append(b, `,"exclusive":true`...)
	}
	return append(b, '}'), nil
}

func (p *frameClaimedRaw) decodeMember(key string, raw []byte) error {
	switch {
	case strings.EqualFold(key, "rows"):
		p.Rows = raw
	case strings.EqualFold(key, "buried"):
		return unmarshal(raw, &p.Buried)
	}
	return nil
}

// frameDoneSummary is what the fold reads of a frame.done.
type frameDoneSummary struct {
	Drained  bool           `json:"drained,omitempty"`
	Counts   frameCounts    `json:"counts"`
	Ctx      map[string]any `json:"ctx,omitempty"`
	Fail     string         `json:"fail,omitempty"`
	Released int            `json:"released,omitempty"`
	Returned int            `json:"returned,omitempty"`
	Lost     bool           `json:"lost,omitempty"`
	// Exclusive is frame.done's exclusive.
	Exclusive bool `json:"exclusive,omitempty"`
	// Abandoned is how many keys frame.done's abandoned lists.
	Abandoned int `json:"-"`
	// Unreleased is how many keys frame.done's unreleased lists.
	Unreleased int `json:"-"`
	// Stopped is how many of frame.done's items failed because a cancel
	// stopped them (their error is cancelledError's, as a row a cancel
	// interrupted or never started has).
	Stopped int `json:"-"`
}

// countStopped counts the items of frame.done's raw items list that a
// cancel stopped. Only a list that holds the cancel's error is decoded.
func countStopped(raw []byte) (int, error) {
	if !bytes.Contains(raw, []byte(`"error":"`+cancelledError)) {
		return 0, nil
	}
	var items []ItemOutcome
	if err := unmarshal(raw, &items); err != nil {
		return 0, err
	}
	n := 0
	for _, it := range items {
		if it.Outcome != OutcomeOK && it.Outcome != OutcomeDead && strings.HasPrefix(it.Error, cancelledError) {
			n++
		}
	}
	return n, nil
}

// UnmarshalJSON reads the summary without decodeMember (an abandoned
// list's length too).
func (p *frameDoneSummary) UnmarshalJSON(b []byte) error {
	type plain frameDoneSummary
	var full struct {
		plain
		Abandoned  []string        `json:"abandoned"`
		Unreleased []string        `json:"unreleased"`
		Items      json.RawMessage `json:"items"`
	}
	if err := unmarshal(b, &full); err != nil {
		return err
	}
	*p = frameDoneSummary(full.plain)
	p.Abandoned, p.Unreleased = len(full.Abandoned), len(full.Unreleased)
	var err error
	p.Stopped, err = countStopped(full.Items)
	return err
}

func (p *frameDoneSummary) decodeMember(key string, raw []byte) error {
	switch strings.ToLower(key) {
	case "drained":
		return unmarshal(raw, &p.Drained)
	case "counts":
		return decodeCounts(raw, &p.Counts)
	case "ctx":
		return unmarshal(raw, &p.Ctx)
	case "fail":
		return unmarshal(raw, &p.Fail)
	case "released":
		return unmarshal(raw, &p.Released)
	case "returned":
		return unmarshal(raw, &p.Returned)
	case "lost":
		return unmarshal(raw, &p.Lost)
	case "exclusive":
		return unmarshal(raw, &p.Exclusive)
	case "abandoned":
		var keys []string
		if err := unmarshal(raw, &keys); err != nil {
			return err
		}
		p.Abandoned = len(keys)
	case "unreleased":
		var keys []string
		if err := unmarshal(raw, &keys); err != nil {
			return err
		}
		p.Unreleased = len(keys)
	case "items":
		n, err := countStopped(raw)
		if err != nil {
			return err
		}
		p.Stopped = n
	}
	return nil
}

// frameCounts counts a frame's rows by outcome.
type frameCounts struct {
	Rows   int `json:"rows"`
	OK     int `json:"ok"`
	Failed int `json:"failed"`
	Dead   int `json:"dead"`
}

// decodeCounts reads frame.done's counts into c as unmarshal does. The
// form the engine writes, its four members each a plain integer, is read
// without encoding/json, which the fold would otherwise run once a frame;
// anything else (another key, a null, a number that is not a plain int)
// is left to unmarshal.
func decodeCounts(raw []byte, c *frameCounts) error {
	fast := *c
	err := jsonnum.Members(raw, func(key string, v []byte) error {
		var f *int
		switch key {
		case "rows":
			f = &fast.Rows
		case "ok":
			f = &fast.OK
		case "failed":
			f = &fast.Failed
		case "dead":
			f = &fast.Dead
		default:
			return errNotPlainCounts
		}
		n, err := strconv.Atoi(string(v))
		if err != nil {
			return errNotPlainCounts
		}
		*f = n
		return nil
	})
	if err == nil {
		*c = fast
		return nil
	}
	return unmarshal(raw, c)
}

// errNotPlainCounts sends decodeCounts to unmarshal.
var errNotPlainCounts = errors.New("not the engine's plain counts")

func countOutcomes(items []ItemOutcome) frameCounts {
	c := frameCounts{Rows: len(items)}
	for _, it := range items {
		switch it.Outcome {
		case OutcomeOK:
			c.OK++
		case OutcomeDead:
			c.Dead++
		default:
			c.Failed++
		}
	}
	return c
}

// stepDonePayload is step.completed's, step.failed's, step.skipped's and
// loop.done's payload: the step's result, its assignments and its routing
// decision, all in one event so a cut history never holds half a decision.
type stepDonePayload struct {
	Run    string         `json:"run"`
	Result map[string]any `json:"result,omitempty"`
	Ctx    map[string]any `json:"ctx,omitempty"`
	Vars   map[string]any `json:"vars,omitempty"`
	Next   []nextStep     `json:"next,omitempty"`
	Error  string         `json:"error,omitempty"`
	Field  string         `json:"field,omitempty"`
	// Joined: see issuedPayload.Joined (a joined step that was skipped).
	Joined []string `json:"joined,omitempty"`
}

type nextStep struct {
	Step string         `json:"step"`
	Args map[string]any `json:"args,omitempty"`
}

// loopStartedPayload is loop.started's payload.
type loopStartedPayload struct {
	Run   string `json:"run"`
	Mode  string `json:"mode"`
	Items []any  `json:"items,omitempty"`
	// ItemsRef replaces Items when the collection was stored (larger than
	// the result store's threshold); Count is then its length.
	ItemsRef map[string]any `json:"items_ref,omitempty"`
	Count    int            `json:"count,omitempty"`
	// Shards is a fan-out loop's number of shards.
	Shards      int    `json:"shards,omitempty"`
	MaxInFlight int    `json:"max_in_flight"`
	ChunkSize   int    `json:"chunk_size,omitempty"`
	Error       string `json:"error,omitempty"`
	// Joined: see issuedPayload.Joined.
	Joined []string `json:"joined,omitempty"`
}

// finishedPayload is the payload of the terminal execution events.
type finishedPayload struct {
	Step    string `json:"step,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// maxPayloadDepth bounds how deeply a value the engine records may nest
// when it has to walk it (see encodeJSON): encoding/json reads back no
// deeper than 10000 levels, so a deeper value could be written but never
// replayed.
const maxPayloadDepth = 10000

// mustJSON encodes an event's payload (see encodeJSON). A payload that
// cannot be encoded is recorded as {"encode_error": "..."} rather than
// lose the event; a payload that carries what a tool or a caller returned
// (a command's report, execution.started) goes through encodeJSON and
// fails its command or call instead.
func mustJSON(v any) json.RawMessage {
	b, err := encodeJSON(v)
	if err == nil {
		return b
	}
	b, _ = json.Marshal(map[string]string{"encode_error": err.Error()})
	return b
}

// encodeJSON encodes an event's payload. Rendered values may hold what
// JSON cannot: non-finite floats (1/0 in a template) are recorded as
// strings rather than lose the event. Anything else JSON cannot encode (a
// channel, a func, a complex number), a value that holds itself (a cycle)
// and one nested more than maxPayloadDepth levels deep is an error saying
// where it is in the payload, for the caller to fail on.
func encodeJSON(v any) (json.RawMessage, error) {
	if a, ok := v.(jsonAppender); ok {
		if b, err := a.appendJSON(nil); err == nil { // each sizes its buffer
			return b, nil
		}
	}
	b, err := json.Marshal(v)
	if err == nil {
		return b, nil
	}
	// The walk below runs only once encoding has failed: the common
	// payload is encoded once, without it.
	s, serr := sanitize(reflectToAny(v), "", 0, nil)
	if serr != nil {
		return nil, serr
	}
	if b, err2 := json.Marshal(s); err2 == nil {
		return b, nil
	}
	return nil, fmt.Errorf("the value cannot be encoded as JSON: %w", err)
}

// startedJSON encodes execution.started's payload, or says why it cannot
// be recorded: the event carries the playbook and the workload that
// Inspect and Resume rebuild the execution from, so Start must refuse
// what it could not record whole rather than record an encode error.
func startedJSON(p startedPayload) (json.RawMessage, error) {
	b, err := encodeJSON(p)
	if err != nil {
		return nil, fmt.Errorf("engine: the execution cannot be recorded: %w", err)
	}
	return b, nil
}

// reflectToAny copies a payload struct's top-level fields into a map keyed
// by their JSON names, so sanitize can walk the rendered values inside.
func reflectToAny(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Struct {
		return v
	}
	m := map[string]any{}
	t := rv.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = f.Name
		}
		m[name] = rv.Field(i).Interface()
	}
	return m
}

// containerID identifies a map or list while sanitize is inside it, as
// encoding/json tells its cycles: by pointer (and length, for a list).
type containerID struct {
	ptr uintptr
	n   int
}

// sanitize returns a copy of v with non-finite floats written as strings,
// or an error naming the path (from the payload's top) of what JSON
// cannot encode. inside holds the maps and lists on the path to v: one
// met again is a cycle, which would otherwise recurse without end.
func sanitize(v any, path string, depth int, inside map[containerID]bool) (any, error) {
	if depth > maxPayloadDepth {
		return nil, fmt.Errorf("%s is nested more than %d levels deep, more than JSON in the log may hold", pathName(path), maxPayloadDepth)
	}
	switch t := v.(type) {
	case nil, bool, string, int, int64, int32, uint, uint64, json.Number:
		return v, nil
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return strconv.FormatFloat(t, 'g', -1, 64), nil
		}
		return v, nil
	case float32:
		if f := float64(t); math.IsInf(f, 0) || math.IsNaN(f) {
			return strconv.FormatFloat(f, 'g', -1, 32), nil
		}
		return v, nil
	case map[string]any:
		if t == nil {
			return v, nil
		}
		id := containerID{ptr: reflect.ValueOf(t).Pointer()}
		if inside[id] {
			return nil, fmt.Errorf("%s refers back to a map that contains it (a cycle), which JSON cannot encode", pathName(path))
		}
		inside = enter(inside, id)
		defer delete(inside, id)
		c := make(map[string]any, len(t))
		for k, x := range t {
			var err error
			if c[k], err = sanitize(x, joinPath(path, k), depth+1, inside); err != nil {
				return nil, err
			}
		}
		return c, nil
	case []any:
		return sanitizeList(t, path, depth, inside)
	case []map[string]any:
		// A chunk's outputs (completedPayload.Outputs).
		l := make([]any, len(t))
		for i, m := range t {
			l[i] = m
		}
		return sanitizeList(l, path, depth, inside)
	}
	// Any other type: encoding/json tells whether it can encode it (and
	// finds cycles through pointers and typed containers itself).
	if _, err := json.Marshal(v); err != nil {
		var ute *json.UnsupportedTypeError
		if errors.As(err, &ute) {
			return nil, encodeError{fmt.Sprintf("%s holds a %s, which JSON cannot encode", pathName(path), ute.Type), err}
		}
		return nil, encodeError{fmt.Sprintf("%s (a %T) cannot be encoded as JSON: %v", pathName(path), v, err), err}
	}
	return v, nil
}

func sanitizeList(t []any, path string, depth int, inside map[containerID]bool) (any, error) {
	if t == nil {
		return t, nil
	}
	if len(t) > 0 {
		id := containerID{ptr: reflect.ValueOf(t).Pointer(), n: len(t)}
		if inside[id] {
			return nil, fmt.Errorf("%s refers back to a list that contains it (a cycle), which JSON cannot encode", pathName(path))
		}
		inside = enter(inside, id)
		defer delete(inside, id)
	}
	c := make([]any, len(t))
	for i, x := range t {
		var err error
		if c[i], err = sanitize(x, path+"["+strconv.Itoa(i)+"]", depth+1, inside); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// encodeError says where in a payload a value JSON cannot encode is,
// wrapping encoding/json's error without repeating its text.
type encodeError struct {
	msg string
	err error
}

func (e encodeError) Error() string { return e.msg }
func (e encodeError) Unwrap() error { return e.err }

// enter marks id as on sanitize's path, making the set on first use.
func enter(inside map[containerID]bool, id containerID) map[containerID]bool {
	if inside == nil {
		inside = map[containerID]bool{}
	}
	inside[id] = true
	return inside
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func pathName(path string) string {
	if path == "" {
		return "the value"
	}
	return path
}
