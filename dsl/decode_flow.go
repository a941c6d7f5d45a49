package dsl

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ---------------------------------------------------------------------------
// Loops

// loopModes maps every mode a loop may name to the mode it runs as.
var loopModes = map[string]string{
	ModeSequential: ModeSequential, ModeParallel: ModeParallel, "async": ModeParallel,
	ModeChunked: ModeChunked, ModeCursor: ModeCursor,
}

func (d *decoder) loop(n *yaml.Node, what string) *Loop {
	n = d.resolve(n)
	if d.isNull(n) {
		d.errorf(n, "%s: loop is empty", what)
		return nil
	}
	ps, ok := d.mapping(n, what+": loop")
	if !ok {
		return nil
	}
	l := &Loop{Pos: d.pos(n)}
	var modeNode, frameNode, inKey, iterKey, loopModeNode, fanoutNode *yaml.Node
	var loopMode string
	intField := func(p pair, w string, dst *int) {
		if t, ok := d.templated(p.v, w); ok {
			putTemplate(&l.Templates, p.key, t)
			return
		}
		v, _ := d.nonNegInt(p.v, w)
		*dst = int(min(v, math.MaxInt32))
	}
	var limitKey string
	specKeys := func(p pair, prefix string) bool {
		w := what + ": " + prefix + p.key
		switch p.key {
		case "mode":
			l.Mode, _ = d.str(p.v, w)
			modeNode = p.v
		case "max_in_flight", "concurrency":
			if limitKey != "" {
				d.errorf(p.k, "%s: loop has both %s and %s", what, limitKey, p.key)
				return true
			}
			limitKey = p.key
			d.noteLimit(l, prefix+p.key, p.k)
			intField(pair{key: "max_in_flight", k: p.k, v: p.v}, w, &l.MaxInFlight)
			if l.MaxInFlight > MaxInFlight {
				d.errorf(p.v, "%s: %d is more than %d", w, l.MaxInFlight, MaxInFlight)
			}
		case "chunk_size", "batch_size":
			d.noteLimit(l, prefix+p.key, p.k)
			intField(pair{key: "chunk_size", k: p.k, v: p.v}, w, &l.ChunkSize)
		case "loop_mode":
			loopMode, _ = d.str(p.v, w)
			loopModeNode = p.v
		case "shards", "shard_size", "max_shard_retries":
			v, _ := d.nonNegInt(p.v, w)
			n := int(min(v, math.MaxInt32))
			switch p.key {
			case "shards":
				l.Fanout.Shards = n
			case "shard_size":
				l.Fanout.ShardSize = n
			default:
				l.Fanout.MaxShardRetries = n
			}
			fanoutNode = p.v
		case "allow_partial":
			l.Fanout.AllowPartial = d.boolean(p.v, w)
			fanoutNode = p.v
		case "frame":
			frameNode = p.v
			d.frame(&l.Frame, p.v, w)
		case "policy":
			l.Policy = d.loopPolicy(p.v, w)
		default:
			return false
		}
		return true
	}
	for _, p := range ps {
		switch p.key {
		case "in", "collection":
			if inKey != nil {
				d.errorf(p.k, "%s: loop has both %s and %s", what, inKey.Value, p.key)
				continue
			}
			inKey = p.k
			if d.isNull(p.v) {
				d.errorf(p.v, "%s: loop.%s is empty", what, p.key)
				continue
			}
			l.In = d.valueOf(p.v, what+": loop."+p.key)
		case "iterator", "element":
			if iterKey != nil {
				d.errorf(p.k, "%s: loop has both %s and %s", what, iterKey.Value, p.key)
				continue
			}
			iterKey = p.k
			l.Iterator, _ = d.str(p.v, what+": loop."+p.key)
		case "cursor":
			l.Cursor = d.cursor(p.v, what)
		case "sink":
			l.Sink = d.sink(p.v, what+": loop.sink")
		case "aggregate":
			d.field(p.k, what, "loop.aggregate")
		case "spec":
			sps, _ := d.mapping(p.v, what+": loop.spec")
			for _, sp := range sps {
				if !specKeys(sp, "loop.spec.") {
					d.unknown(sp.k, what+": loop.spec", sp.key)
				}
			}
		default:
			// NoETL v1 and the loop design write the spec keys directly
			// under loop.
			if !specKeys(p, "loop.") {
				d.unknown(p.k, what+": loop", p.key)
			}
		}
	}
	switch {
	case l.In == nil && l.Cursor == nil:
		d.errorf(n, "%s: loop needs in (a collection) or cursor", what)
	case l.In != nil && l.Cursor != nil:
		d.errorf(n, "%s: loop cannot have both in and cursor", what)
	}
	if l.Iterator == "" {
		d.errorf(n, "%s: loop.iterator is required", what)
	}
	fanout := false
	switch loopMode {
	case "", "local":
		if fanoutNode != nil {
			d.warnf(fanoutNode, "%s: shards, shard_size, max_shard_retries and allow_partial only apply to loop_mode fanout (ignored)", what)
		}
	case ModeFanout:
		switch {
		case l.Cursor != nil:
			d.errorf(loopModeNode, "%s: loop_mode fanout needs loop.in (a collection), not a cursor", what)
		case l.Fanout.Shards > 0 && l.Fanout.ShardSize > 0:
			d.errorf(loopModeNode, "%s: give loop_mode fanout shards or shard_size, not both", what)
		}
		fanout = true
	default:
		d.errorf(loopModeNode, "%s: bad loop_mode %q (want fanout or local)", what, loopMode)
	}
	mode, known := loopModes[l.Mode]
	switch {
	case l.Mode == "":
		if l.Cursor != nil {
			l.Mode = ModeCursor
		} else {
			l.Mode = ModeSequential
		}
	case !known:
		d.errorf(modeNode, "%s: bad loop mode %q (want sequential, parallel, async, chunked or cursor)", what, l.Mode)
	case mode == ModeCursor:
		l.Mode = mode
		if l.Cursor == nil && l.In != nil {
			d.errorf(modeNode, "%s: mode cursor needs loop.cursor", what)
		}
	default:
		l.Mode = mode
		if l.Cursor != nil {
			d.errorf(modeNode, "%s: a cursor loop's mode must be cursor, got %q", what, l.Mode)
		}
	}
	if l.ChunkSize == 0 {
		l.ChunkSize = DefaultChunkSize
	}
	if fanout && l.Cursor == nil {
		// The items go to shards; mode sequential or parallel says
		// nothing more (max_in_flight bounds the shards at once).
		l.Mode = ModeFanout
	}
	if frameNode != nil && l.Cursor == nil && l.In != nil {
		d.warnf(frameNode, "%s: frame only applies to cursor loops (ignored)", what)
	}
	if l.Frame.Templates["heartbeat_seconds"] == nil && l.Frame.HeartbeatSeconds == 0 && l.Frame.Templates["lease_seconds"] != nil {
		l.Frame.hbFromLease = true
	}
	reported := false // a heartbeat too long for reclaim_after
	if c := l.Cursor; c != nil {
		if c.MaxAttempts > 0 && l.Frame.MaxAttempts == 0 {
			// A templated frame.max_attempts still wins when it renders.
			l.Frame.MaxAttempts = c.MaxAttempts
		}
		if secs := c.ReclaimAfter.Seconds(); secs > 0 {
			// The engine holds the claims: reclaiming a silent frame's rows
			// is re-issuing the frame, so reclaim_after bounds its lease
			// (a templated lease too, once rendered: FrameSpec.Resolve).
			l.Frame.leaseCap = secs
			if l.Frame.Templates["heartbeat_seconds"] == nil && l.Frame.HeartbeatSeconds >= secs {
				d.errorAt(c.Pos, "%s: cursor reclaim_after (%gs) must be longer than frame heartbeat_seconds (%g)", what, secs, l.Frame.HeartbeatSeconds)
				reported = true
			}
			lease := l.Frame.LeaseSeconds
			if lease == 0 {
				lease = DefaultFrameLeaseSeconds
			}
			if secs < lease {
				l.Frame.LeaseSeconds = secs
			}
		}
	}
	fillFrameDefaults(&l.Frame)
	if f := l.Frame; len(f.Templates) == 0 && f.HeartbeatSeconds >= f.LeaseSeconds && !reported {
		at := frameNode
		if at == nil {
			at = n
		}
		d.errorf(at, "%s: frame heartbeat_seconds (%g) must be less than lease_seconds (%g)", what, f.HeartbeatSeconds, f.LeaseSeconds)
	}
	return l
}

// limitKey is a max_in_flight (concurrency) or chunk_size (batch_size)
// key a loop wrote: path is its path as written (loop.spec.max_in_flight),
// k the key's node.
type limitKey struct {
	path string
	k    *yaml.Node
}

func (d *decoder) noteLimit(l *Loop, path string, k *yaml.Node) {
	if d.loopLimits == nil {
		d.loopLimits = make(map[*Loop][]limitKey)
	}
	d.loopLimits[l] = append(d.loopLimits[l], limitKey{path: path, k: k})
}

// lintLoopLimits warns about the limits of s's loop that its mode does
// not read, once the step has settled the mode (spec.loop_mode fanout on
// the step changes it): a sequential loop runs one item at a time
// whatever its max_in_flight, and only mode chunked reads chunk_size. A
// user who writes max_in_flight: 10 and no mode expects ten items at once
// and would otherwise get one, without a word.
func (d *decoder) lintLoopLimits(s *Step, what string) {
	if s.Loop == nil {
		return
	}
	for _, lk := range d.loopLimits[s.Loop] {
		name := lk.path[strings.LastIndexByte(lk.path, '.')+1:]
		switch name {
		case "max_in_flight", "concurrency":
			if s.Loop.Mode != ModeSequential || (s.Loop.MaxInFlight == 1 && s.Loop.Templates["max_in_flight"] == nil) {
				continue
			}
			d.warnf(lk.k, "%s: %s does nothing in mode sequential, which runs one item at a time; give mode: parallel (or chunked) to run items at once (ignored)", what, lk.path)
		default:
			if s.Loop.Mode == ModeChunked {
				continue
			}
			d.warnf(lk.k, "%s: %s only applies to mode chunked, not %s (ignored)", what, lk.path, s.Loop.Mode)
		}
	}
}

// loopPolicy decodes loop.spec.policy: rules for the loop's items, and
// NoETL's exec placement hint.
func (d *decoder) loopPolicy(n *yaml.Node, what string) *Policy {
	n = d.resolve(n)
	if n != nil && n.Kind == yaml.MappingNode {
		ps, _ := d.mapping(n, what)
		if hasKey(ps, "exec") {
			for _, p := range ps {
				if p.key == "exec" {
					d.field(p.k, what, "loop.spec.policy.exec")
				}
			}
			// Decode the rest without the exec key.
			rest := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
			for _, p := range ps {
				if p.key != "exec" {
					rest.Content = append(rest.Content, p.k, p.v)
				}
			}
			if len(rest.Content) == 0 {
				return nil
			}
			n = rest
		}
	}
	pol, admit := d.policy(n, what)
	if admit != nil {
		d.refuse(n, what+": admit applies to steps, not loops (refused at run)")
	}
	return pol
}

// sqlCursorKinds are the cursor kinds whose claim is a SQL statement the
// playbook must supply.
var sqlCursorKinds = []string{"postgres", "mysql", "sqlite", "clickhouse"}

// IsSQLCursor reports whether a cursor of kind claims through a SQL
// statement of the playbook's (claim:, and ack:, release:, dead_letter:
// where the driver takes them), whose %(name)s placeholders sqlcursor
// fills.
func IsSQLCursor(kind string) bool { return slices.Contains(sqlCursorKinds, kind) }

// statementCursorKinds are the cursor kinds whose dead letter is a
// dead_letter statement of the playbook's.
var statementCursorKinds = []string{"postgres", "mysql", "sqlite"}

func (d *decoder) cursor(n *yaml.Node, what string) *CursorSpec {
	n = d.resolve(n)
	ps, ok := d.mapping(n, what+": loop.cursor")
	if !ok || n == nil {
		return nil
	}
	c := &CursorSpec{Pos: d.pos(n)}
	var authKey string
	var knobs []pair
	for _, p := range ps {
		switch p.key {
		case "kind":
			c.Kind, _ = d.str(p.v, what+": cursor.kind")
		case "auth", "credential":
			if authKey != "" {
				d.errorf(p.k, "%s: cursor has both %s and %s", what, authKey, p.key)
				continue
			}
			authKey = p.key
			c.Auth = d.valueOf(p.v, what+": cursor."+p.key)
		case "claim":
			c.Claim = d.template(p.v, what+": cursor.claim")
		case "max_attempts", "reclaim_after":
			knobs = append(knobs, p)
			w := what + ": cursor." + p.key
			if _, ok := d.templated(p.v, w); ok {
				// Read at parse: they bound the frame's attempts and lease,
				// which may themselves be templates.
				alt := "max_attempts"
				if p.key == "reclaim_after" {
					alt = "lease_seconds"
				}
				d.errorf(p.v, "%s must be a literal (template loop.spec.frame.%s instead)", w, alt)
				continue
			}
			if p.key == "max_attempts" {
				v, _ := d.nonNegInt(p.v, w)
				c.MaxAttempts = int(min(v, math.MaxInt32))
			} else {
				c.ReclaimAfter, _ = d.seconds(p.v, w)
			}
		default:
			if c.Options == nil {
				c.Options = make(map[string]*Value)
				c.KeyPos = make(map[string]Pos)
			}
			c.Options[p.key] = d.valueOf(p.v, what+": cursor."+p.key)
			c.KeyPos[p.key] = d.pos(p.k)
		}
	}
	if c.Kind == "" {
		d.errorf(n, "%s: cursor.kind is required", what)
	} else if c.Claim == nil && IsSQLCursor(c.Kind) && !hasKey(ps, "claim") {
		d.errorf(n, "%s: a %s cursor needs claim (the SQL that leases rows)", what, c.Kind)
	}
	if need := missingCursorOption(c.Kind, ps); need != "" {
		d.errorf(n, "%s: a %s cursor needs %s", what, c.Kind, need)
	}
	if len(knobs) > 0 && slices.Contains(statementCursorKinds, c.Kind) && !hasKey(ps, "dead_letter") {
		d.warnf(knobs[0].k, "%s: cursor.%s without a dead_letter statement: rows the engine gives up on cannot be moved and stay claimed in the table", what, knobs[0].key)
	} else if slices.Contains(statementCursorKinds, c.Kind) && !hasKey(ps, "release") && !hasKey(ps, "dead_letter") {
		d.warnf(n, "%s: a %s cursor without a release or dead_letter statement: rows whose body fails, and rows a failed or cancelled frame did not run, "+
			"stay claimed in the table unless the claim itself takes stale claims back; add release: to hand them back or dead_letter: to set them aside", what, c.Kind)
	}
	if slices.Contains(statementCursorKinds, c.Kind) && c.Claim != nil {
		for _, p := range ps {
			if p.key == "dead_letter" && !returnsAttempts(c.Claim.Source) {
				// The statement still runs for a frame the engine gives up
				// on (its lease expired max_attempts times): only the
				// driver's own count of a failing row's deliveries is lost.
				d.warnf(p.k, "%s: cursor.dead_letter never sets aside a row that keeps failing: the claim's RETURNING lists no attempts column (%s), "+
					"from which the driver counts a row's deliveries; such a row past max_attempts stops the loop instead "+
					"(the statement runs only for a frame whose lease kept expiring)",
					what, strings.Join(attemptColumns, ", "))
			}
		}
	}
	return c
}

// attemptColumns are the claim columns a SQL cursor reads as a row's
// delivery counter (cursor/sqlcursor's, which dsl cannot import).
var attemptColumns = []string{"attempts", "attempt", "attempt_count"}

// returnsAttempts reports whether a claim statement may return an attempts
// column: false only when its last RETURNING clause, with no SELECT after
// it (whose list could add the column) and no template (which could
// render one), names none of attemptColumns as an output column and no *.
// An item's output name is its alias (AS name) or else its last
// identifier (q.attempts), as PostgreSQL names it; comments are skipped.
// A claim without RETURNING (a SELECT ... FOR UPDATE) is not judged.
func returnsAttempts(claim string) bool {
	sql := strings.ToLower(stripSQLComments(claim))
	loc := returningWord.FindAllStringIndex(sql, -1)
	if loc == nil {
		return true
	}
	rest := sql[loc[len(loc)-1][1]:]
	if strings.Contains(rest, "{{") || selectWord.MatchString(rest) {
		return true
	}
	for _, item := range splitTopLevel(rest) {
		fields := strings.Fields(strings.TrimRight(strings.TrimSpace(item), ";"))
		if len(fields) == 0 {
			continue
		}
		name := fields[len(fields)-1]
		name = strings.Trim(name[strings.LastIndexByte(name, '.')+1:], `"`)
		if name == "*" || slices.Contains(attemptColumns, name) {
			return true
		}
	}
	return false
}

var (
	returningWord = regexp.MustCompile(`\breturning\b`)
	selectWord    = regexp.MustCompile(`\bselect\b`)
)

// stripSQLComments drops -- line comments and /* */ block comments (not
// inside quotes: good enough for a lint).
func stripSQLComments(sql string) string {
	var b strings.Builder
	for i := 0; i < len(sql); i++ {
		switch {
		case strings.HasPrefix(sql[i:], "--"):
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				return b.String()
			}
			i += j - 1
		case strings.HasPrefix(sql[i:], "/*"):
			j := strings.Index(sql[i+2:], "*/")
			if j < 0 {
				return b.String()
			}
			i += j + 3
			b.WriteByte(' ')
		default:
			b.WriteByte(sql[i])
		}
	}
	return b.String()
}

// splitTopLevel splits a select list at the commas outside parentheses.
func splitTopLevel(list string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(list); i++ {
		switch list[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, list[start:i])
				start = i + 1
			}
		}
	}
	return append(out, list[start:])
}

// missingCursorOption names what a cursor block of kind, with keys ps,
// lacks that its driver cannot open without (the drivers' own Open
// refuses it too, but only once the loop runs), or "". A value that is a
// template counts as given; a null one does not.
func missingCursorOption(kind string, ps []pair) string {
	switch kind {
	case "redisstream", "natsconsumer":
		if !hasValue(ps, "stream") {
			return "stream (the stream it drains)"
		}
	case "clickhouse":
		threeTables := hasValue(ps, "claims_table") && hasValue(ps, "done_table") && hasValue(ps, "dead_table")
		if !hasValue(ps, "table") && !threeTables {
			return "table (which names its <table>_claims, _done and _dead tables), or claims_table, done_table and dead_table"
		}
	}
	return ""
}

// hasValue reports whether ps sets key to something other than null
// (stream: with nothing after it is no stream).
func hasValue(ps []pair, key string) bool {
	for _, p := range ps {
		if p.key == key {
			return p.v != nil && p.v.Tag != "!!null"
		}
	}
	return false
}

func hasKey(ps []pair, key string) bool {
	for _, p := range ps {
		if p.key == key {
			return true
		}
	}
	return false
}

func (d *decoder) frame(f *FrameSpec, n *yaml.Node, what string) {
	ps, _ := d.mapping(n, what)
	for _, p := range ps {
		w := what + "." + p.key
		if f.KeyPos == nil {
			f.KeyPos = make(map[string]Pos, len(ps))
		}
		f.KeyPos[p.key] = d.pos(p.k)
		if _, numeric := frameNumbers[p.key]; numeric {
			if t, ok := d.templated(p.v, w); ok {
				putTemplate(&f.Templates, p.key, t)
				continue
			}
		}
		switch p.key {
		case "max_rows":
			v, _ := d.nonNegInt(p.v, w)
			f.MaxRows = int(min(v, math.MaxInt32))
		case "row_concurrency":
			v, _ := d.nonNegInt(p.v, w)
			f.RowConcurrency = int(min(v, math.MaxInt32))
		case "lease_seconds":
			f.LeaseSeconds = d.frameSeconds(p.v, w)
		case "heartbeat_seconds":
			f.HeartbeatSeconds = d.frameSeconds(p.v, w)
		case "max_seconds":
			f.MaxSeconds = d.frameSeconds(p.v, w)
		case "max_bytes":
			f.MaxBytes, _ = d.nonNegInt(p.v, w)
		case "max_attempts":
			v, _ := d.nonNegInt(p.v, w)
			f.MaxAttempts = int(min(v, math.MaxInt32))
		case "process":
			f.Process, _ = d.str(p.v, w)
			if f.Process != "" && f.Process != ProcessRow && f.Process != ProcessFrame {
				d.errorf(p.v, "%s: bad process %q (want row or frame)", what, f.Process)
			}
		default:
			d.unknown(p.k, what, p.key)
		}
	}
}

// Frame defaults, applied to every loop.
const (
	DefaultFrameMaxRows        = 1
	DefaultFrameRowConcurrency = 1
	DefaultFrameLeaseSeconds   = 60
	DefaultFrameMaxAttempts    = 3
	DefaultRetryAttempts       = 3
)

// HeartbeatsPerLease is how many heartbeats fit in a lease by default: a
// frame's heartbeat_seconds defaults to lease_seconds/HeartbeatsPerLease
// (the engine does the same for step and item commands), so a worker that
// dies is noticed after a few missed heartbeats, well before its lease
// would run out.
const HeartbeatsPerLease = 10

func fillFrameDefaults(f *FrameSpec) {
	if f.MaxRows == 0 {
		f.MaxRows = DefaultFrameMaxRows
	}
	if f.RowConcurrency == 0 {
		f.RowConcurrency = DefaultFrameRowConcurrency
	}
	if f.LeaseSeconds == 0 {
		f.LeaseSeconds = DefaultFrameLeaseSeconds
	}
	if f.HeartbeatSeconds == 0 {
		f.HeartbeatSeconds = f.LeaseSeconds / HeartbeatsPerLease
	}
	if f.Process == "" {
		f.Process = ProcessRow
	}
	if f.MaxAttempts == 0 {
		f.MaxAttempts = DefaultFrameMaxAttempts
	}
}

// ---------------------------------------------------------------------------
// Routing

func (d *decoder) next(n *yaml.Node, what string) *Next {
	n = d.resolve(n)
	if d.isNull(n) {
		return nil
	}
	nx := &Next{Mode: NextExclusive, Pos: d.pos(n)}
	switch n.Kind {
	case yaml.ScalarNode:
		nx.Arcs = []*Arc{{Step: n.Value, Pos: d.pos(n)}}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			if a := d.arc(item, what); a != nil {
				nx.Arcs = append(nx.Arcs, a)
			}
		}
	case yaml.MappingNode:
		ps, _ := d.mapping(n, what+": next")
		if hasKey(ps, "step") && !hasKey(ps, "arcs") {
			// A single arc written as a mapping.
			if a := d.arc(n, what); a != nil {
				nx.Arcs = append(nx.Arcs, a)
			}
			return nx
		}
		for _, p := range ps {
			switch p.key {
			case "spec":
				sps, _ := d.mapping(p.v, what+": next.spec")
				for _, sp := range sps {
					switch sp.key {
					case "mode":
						d.nextMode(nx, sp.v, what+": next.spec.mode")
					case "on_no_match":
						d.onNoMatch(nx, sp.v, what)
					default:
						d.unknown(sp.k, what+": next.spec", sp.key)
					}
				}
			case "arcs":
				items, _ := d.list(p.v, what+": next.arcs")
				for _, item := range items {
					if a := d.arc(item, what); a != nil {
						nx.Arcs = append(nx.Arcs, a)
					}
				}
			case "mode":
				// NoETL v1 put the mode directly under next.
				d.nextMode(nx, p.v, what+": next.mode")
			case "on_no_match":
				d.onNoMatch(nx, p.v, what)
			default:
				d.unknown(p.k, what+": next", p.key)
			}
		}
	default:
		d.errorf(n, "%s: next must be a step name, a list or a mapping, got %s", what, kindName(n))
		return nil
	}
	return nx
}

func (d *decoder) nextMode(nx *Next, v *yaml.Node, what string) {
	m, _ := d.str(v, what)
	switch m {
	case "":
	case NextExclusive, NextInclusive:
		nx.Mode = m
	default:
		d.errorf(v, "%s: bad next mode %q (want exclusive or inclusive)", strings.SplitN(what, ":", 2)[0], m)
	}
}

// On-no-match behaviours.
const (
	NoMatchQuiet = "quiet"
	NoMatchError = "error"
)

func (d *decoder) onNoMatch(nx *Next, v *yaml.Node, what string) {
	m, _ := d.str(v, what+": next.spec.on_no_match")
	switch strings.ToLower(m) {
	case "", NoMatchQuiet, "ignore", "continue", "end":
		nx.OnNoMatch = NoMatchQuiet
	case NoMatchError, "fail":
		nx.OnNoMatch = NoMatchError
	default:
		d.errorf(v, "%s: bad on_no_match %q (want quiet or error)", what, m)
	}
}

func (d *decoder) arc(n *yaml.Node, what string) *Arc {
	n = d.resolve(n)
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		name, _ := d.str(n, what+": next")
		if name == "" {
			d.errorf(n, "%s: empty next target", what)
			return nil
		}
		return &Arc{Step: name, Pos: d.pos(n)}
	}
	ps, ok := d.mapping(n, what+": next arc")
	if !ok {
		return nil
	}
	a := &Arc{Pos: d.pos(n)}
	var argsSetBy map[string]string
	for _, p := range ps {
		switch p.key {
		case "step":
			a.Step, _ = d.str(p.v, what+": arc step")
			a.Pos = d.pos(d.resolve(p.v))
		case "when":
			a.When = d.template(p.v, what+": arc when")
		case "set":
			a.Set = d.assignments(p.v, what+": arc set")
		case "args", "input":
			d.args(&a.Args, &argsSetBy, p, what+": arc "+p.key, func(ap pair, _ string) {
				d.errorf(ap.k, "%s: arc argument %q is set twice", what, ap.key)
			})
		case "desc", "description":
		default:
			d.unknown(p.k, what+": next arc", p.key)
		}
	}
	if a.Step == "" {
		d.errorf(n, "%s: next arc needs step", what)
		return nil
	}
	return a
}

// ---------------------------------------------------------------------------
// Policies

// policy decodes a spec.policy block: its rules (nil when there are none)
// and, separately, NoETL's admit block (nil when absent).
func (d *decoder) policy(n *yaml.Node, what string) (*Policy, *Policy) {
	n = d.resolve(n)
	if d.isNull(n) {
		return nil, nil
	}
	var rulesNode *yaml.Node
	var admit *Policy
	switch n.Kind {
	case yaml.SequenceNode:
		rulesNode = n
	case yaml.MappingNode:
		ps, _ := d.mapping(n, what)
		for _, p := range ps {
			switch p.key {
			case "rules":
				rulesNode = p.v
			case "admit":
				admit = d.admit(p.v, what+".admit")
			default:
				d.unknown(p.k, what, p.key)
			}
		}
	default:
		d.errorf(n, "%s must be a mapping with rules, got %s", what, kindName(n))
		return nil, nil
	}
	if rulesNode == nil {
		return nil, admit
	}
	pol := d.rules(rulesNode, n, what)
	if pol != nil {
		for i, r := range pol.Rules {
			if r.Then.Allow != nil {
				// Only admission decides whether a step runs.
				d.warnAt(r.Then.allowPos, "%s.rules[%d].then.allow only applies to spec.policy.admit rules (ignored)", what, i)
			}
		}
	}
	return pol, admit
}

func (d *decoder) rules(rulesNode, at *yaml.Node, what string) *Policy {
	items, ok := d.list(rulesNode, what+".rules")
	if !ok {
		return nil
	}
	pol := &Policy{Pos: d.pos(at)}
	sawElse := false
	for i, item := range items {
		r := d.rule(item, fmt.Sprintf("%s.rules[%d]", what, i))
		if r == nil {
			continue
		}
		if sawElse {
			d.warnf(d.resolve(item), "%s.rules[%d] follows an else rule and never matches", what, i)
		}
		sawElse = sawElse || r.Else
		pol.Rules = append(pol.Rules, r)
	}
	return pol
}

// admit decodes NoETL's admission block {mode, rules: [{when, then:
// {allow}}]}: the first matching rule's allow decides (exclusive, the
// only mode NoETL defines); no matching rule admits.
func (d *decoder) admit(n *yaml.Node, what string) *Policy {
	n = d.resolve(n)
	var rulesNode *yaml.Node
	switch {
	case n == nil:
		return nil
	case n.Kind == yaml.SequenceNode:
		rulesNode = n
	default:
		ps, _ := d.mapping(n, what)
		for _, p := range ps {
			switch p.key {
			case "rules":
				rulesNode = p.v
			case "mode":
				if m, _ := d.str(p.v, what+".mode"); m != "" && m != NextExclusive {
					d.errorf(p.v, "%s: bad admit mode %q (want exclusive)", what, m)
				}
			default:
				d.unknown(p.k, what, p.key)
			}
		}
	}
	if rulesNode == nil {
		return nil
	}
	pol := d.rules(rulesNode, n, what)
	if pol == nil {
		return nil
	}
	for _, r := range pol.Rules {
		if r.Then.Allow == nil {
			d.errorAt(r.Then.Pos, "%s: an admit rule needs then.allow (true or false)", what)
		}
	}
	return pol
}

func (d *decoder) rule(n *yaml.Node, what string) *Rule {
	n = d.resolve(n)
	ps, ok := d.mapping(n, what)
	if !ok || n == nil {
		return nil
	}
	r := &Rule{Pos: d.pos(n)}
	var whenNode, elseNode, thenNode *yaml.Node
	for _, p := range ps {
		switch p.key {
		case "when":
			whenNode = p.v
		case "else":
			elseNode = p.v
		case "then":
			thenNode = p.v
		case "desc", "description":
		default:
			d.unknown(p.k, what, p.key)
		}
	}
	switch {
	case whenNode != nil && elseNode != nil:
		d.errorf(n, "%s: a rule has when or else, not both", what)
		return nil
	case elseNode != nil:
		r.Else = true
		e := d.resolve(elseNode)
		if e != nil && e.Kind == yaml.MappingNode {
			eps, _ := d.mapping(e, what+".else")
			switch {
			case hasKey(eps, "then"):
				for _, ep := range eps {
					if ep.key == "then" {
						if thenNode != nil {
							d.errorf(thenNode, "%s: else rule has two then blocks", what)
						}
						thenNode = ep.v
					} else {
						d.unknown(ep.k, what+".else", ep.key)
					}
				}
			case thenNode == nil:
				// `else: {do: continue}`: the action written directly.
				thenNode = e
			}
		} else if !d.isNull(e) && (e.Kind != yaml.ScalarNode || e.ShortTag() != "!!bool") {
			d.errorf(e, "%s: else must hold then:, got %s", what, kindName(e))
		}
		// Otherwise `- else:` with a sibling `then:` — a common
		// indentation slip in real playbooks, accepted as written.
	case whenNode != nil:
		r.When = d.template(whenNode, what+".when")
	default:
		d.errorf(n, "%s: a rule needs when or else", what)
		return nil
	}
	if thenNode == nil {
		d.errorf(n, "%s: then is required", what)
		return nil
	}
	r.Then = d.action(thenNode, what+".then")
	return r
}

var (
	policyActions = []string{DoContinue, DoRetry, DoBreak, DoJump, DoFail}
	backoffKinds  = []string{BackoffNone, BackoffFixed, BackoffLinear, BackoffExponential}
)

func (d *decoder) action(n *yaml.Node, what string) Action {
	n = d.resolve(n)
	a := Action{Pos: d.pos(n)}
	var actionKeys []pair
	if n != nil && n.Kind == yaml.ScalarNode && !d.isNull(n) {
		// `then: continue`
		a.Do = n.Value
	} else {
		ps, _ := d.mapping(n, what)
		actionKeys = ps
		for _, p := range ps {
			switch p.key {
			case "do":
				a.Do, _ = d.str(p.v, what+".do")
			case "attempts", "max_attempts":
				if t, ok := d.templated(p.v, what+"."+p.key); ok {
					putTemplate(&a.Templates, "attempts", t)
					continue
				}
				v, _ := d.nonNegInt(p.v, what+"."+p.key)
				a.Attempts = int(min(v, math.MaxInt32))
			case "backoff":
				a.Backoff, _ = d.str(p.v, what+".backoff")
				if a.Backoff != "" && !slices.Contains(backoffKinds, a.Backoff) {
					d.errorf(p.v, "%s: bad backoff %q (want none, fixed, linear or exponential)", what, a.Backoff)
				}
			case "delay":
				if t, ok := d.templated(p.v, what+".delay"); ok {
					putTemplate(&a.Templates, "delay", t)
					continue
				}
				a.Delay, _ = d.seconds(p.v, what+".delay")
			case "to":
				a.To, _ = d.str(p.v, what+".to")
			case "set":
				a.Set = d.assignments(p.v, what+".set")
			case "allow":
				v := d.plain(p.v)
				b, ok := v.(bool)
				if !ok {
					d.errorf(p.v, "%s.allow must be true or false", what)
				}
				a.Allow = &b
				a.allowPos = d.pos(p.k)
			default:
				d.unknown(p.k, what, p.key)
			}
		}
	}
	switch {
	case a.Do == "":
		a.Do = DoContinue
	case !slices.Contains(policyActions, a.Do):
		d.errorAt(a.Pos, "%s: bad do %q (want continue, retry, break, jump or fail)", what, a.Do)
	}
	// A retry's shape on a rule that does not retry (then: {attempts: 3}
	// without do: continues at the first failure), or a jump target on
	// one that does not jump, reads as a setting in force.
	for _, p := range actionKeys {
		switch {
		case p.key == "to" && a.Do != DoJump:
			d.warnf(p.k, "%s.to only applies to do: jump (this rule's do is %s; ignored)", what, a.Do)
		case (p.key == "attempts" || p.key == "max_attempts" || p.key == "backoff" || p.key == "delay") && a.Do != DoRetry:
			d.warnf(p.k, "%s.%s only applies to do: retry (this rule's do is %s; ignored)", what, p.key, a.Do)
		}
	}
	if a.Do == DoJump && a.To == "" {
		d.errorAt(a.Pos, "%s: do: jump needs to:", what)
	}
	if a.Do == DoRetry && a.Attempts == 0 {
		a.Attempts = DefaultRetryAttempts
	}
	if a.Backoff == "" {
		a.Backoff = defaultBackoff(a.Delay > 0 || a.Templates["delay"] != nil, BackoffFixed)
	}
	return a
}

// defaultBackoff is the backoff of a rule that names none: delayed (the
// kind a delay implies) when it has a delay, none otherwise.
func defaultBackoff(hasDelay bool, delayed string) string {
	if hasDelay {
		return delayed
	}
	return BackoffNone
}

// frameSeconds reads a frame's seconds field: a non-negative number of at
// most MaxFrameSeconds.
func (d *decoder) frameSeconds(n *yaml.Node, what string) float64 {
	v, ok := d.nonNegFloat(n, what)
	if ok && v > MaxFrameSeconds {
		d.errorf(n, "%s: %g is more than %d seconds (30 days)", what, v, MaxFrameSeconds)
	}
	return v
}
