package dsl

import (
	"fmt"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// ---------------------------------------------------------------------------
// Playbook

func (d *decoder) playbook(root *yaml.Node) *Playbook {
	pb := &Playbook{File: d.file, Pos: d.pos(root), Entry: StartStep, limits: d.limits}
	ps, ok := d.mapping(root, "playbook")
	if !ok {
		return pb
	}
	var workflow *yaml.Node
	for _, p := range ps {
		switch p.key {
		case "apiVersion":
			pb.APIVersion, _ = d.str(p.v, "apiVersion")
			if pb.APIVersion != "" && pb.APIVersion != "noetl.io/v2" {
				d.warnf(p.v, "unexpected apiVersion %q (this build reads noetl.io/v2 playbooks)", pb.APIVersion)
			}
		case "kind":
			pb.Kind, _ = d.str(p.v, "kind")
			if pb.Kind != "" && !strings.EqualFold(pb.Kind, "Playbook") {
				d.warnf(p.v, "unexpected kind %q (want Playbook)", pb.Kind)
			}
		case "metadata":
			d.metadata(pb, p.v)
		case "workload":
			pb.Workload = d.plainMap(p.v, "workload")
		case "vars":
			pb.Vars = d.valueMap(p.v, "vars")
		case "keychain":
			d.keychain(pb, p.v)
		case "workbook":
			d.workbook(pb, p.v)
		case "executor":
			d.executor(pb, p.v)
		case "workflow":
			workflow = p.v
			items, ok := d.list(p.v, "workflow")
			if !ok {
				continue
			}
			for _, item := range items {
				if s := d.step(item); s != nil {
					pb.Workflow = append(pb.Workflow, s)
				}
			}
		default:
			d.unknown(p.k, "playbook", p.key)
		}
	}
	d.lintTaskResultRefs(pb)
	d.lintWorkloadRefs(pb)
	if workflow == nil {
		d.errorf(root, "workflow is required")
	} else if len(pb.Workflow) == 0 {
		if w := d.resolve(workflow); w != nil && (d.isNull(w) || (w.Kind == yaml.SequenceNode && len(w.Content) == 0)) {
			d.errorf(w, "workflow is empty")
		}
	}
	return pb
}

// executor decodes NoETL's executor block: mostly a description of the
// runtime NoETL picks, with a few fields that change the run.
func (d *decoder) executor(pb *Playbook, n *yaml.Node) {
	ps, _ := d.mapping(n, "executor")
	for _, p := range ps {
		switch p.key {
		case "requires":
			rps, _ := d.mapping(p.v, "executor.requires")
			for _, rp := range rps {
				if rp.key != "tools" {
					continue // features and the like describe NoETL's runtime
				}
				items, _ := d.list(rp.v, "executor.requires.tools")
				for _, it := range items {
					if name, ok := d.str(it, "executor.requires.tools[]"); ok && name != "" {
						pb.RequiresTools = append(pb.RequiresTools, Requirement{Name: name, Pos: d.pos(d.resolve(it))})
					}
				}
			}
		case "spec":
			sps, _ := d.mapping(p.v, "executor.spec")
			for _, sp := range sps {
				switch sp.key {
				case "entry_step":
					if e, ok := d.str(sp.v, "executor.spec.entry_step"); ok && e != "" {
						pb.Entry = e
					}
				case "no_next_is_error":
					if v := d.plain(sp.v); v == true {
						d.refuse(sp.k, "executor: spec.no_next_is_error: true is not supported by this build: a step without a matching arc ends its branch (refused at run)")
					}
				case "policy":
					d.executorPolicy(pb, sp.v)
				default:
					d.executorUnread(sp.k, "spec."+sp.key)
				}
			}
		}
	}
}

func (d *decoder) executorPolicy(pb *Playbook, n *yaml.Node) {
	ps, _ := d.mapping(n, "executor.spec.policy")
	for _, p := range ps {
		if p.key == "results" {
			rps, _ := d.mapping(p.v, "executor.spec.policy.results")
			for _, rp := range rps {
				d.field(rp.k, "executor", "playbook.executor.spec.policy.results."+rp.key)
			}
		}
		if p.key != "defaults" {
			if p.key != "results" {
				d.executorUnread(p.k, "spec.policy."+p.key)
			}
			continue
		}
		dps, _ := d.mapping(p.v, "executor.spec.policy.defaults")
		for _, dp := range dps {
			if dp.key == "timeout_s" {
				pb.DefaultTimeout, _ = d.seconds(dp.v, "executor.spec.policy.defaults.timeout_s")
			} else {
				d.executorUnread(dp.k, "spec.policy.defaults."+dp.key)
			}
		}
	}
}

// executorUnread warns about a key of the executor's spec this build does
// not read. The executor block mostly describes NoETL's runtime and is
// not refused, but its spec reads as settings in force (a default retry
// next to the default timeout_s that is honoured): say that it is not.
func (d *decoder) executorUnread(k *yaml.Node, path string) {
	d.warnf(k, "executor: %s is not read by this build (ignored): of executor.spec it reads entry_step, no_next_is_error and policy.defaults.timeout_s", path)
}

func (d *decoder) metadata(pb *Playbook, n *yaml.Node) {
	ps, _ := d.mapping(n, "metadata")
	for _, p := range ps {
		switch p.key {
		case "name":
			pb.Metadata.Name, _ = d.str(p.v, "metadata.name")
			// The name is a key in registries, URLs and logs.
			if strings.ContainsFunc(pb.Metadata.Name, unicode.IsControl) {
				d.errorf(p.v, "metadata.name: %q holds a control character", pb.Metadata.Name)
			}
		case "path":
			pb.Metadata.Path, _ = d.str(p.v, "metadata.path")
		case "description":
			pb.Metadata.Description, _ = d.str(p.v, "metadata.description")
		default:
			if pb.Metadata.Extra == nil {
				pb.Metadata.Extra = make(map[string]any)
			}
			pb.Metadata.Extra[p.key] = d.plain(p.v)
		}
	}
}

func (d *decoder) keychain(pb *Playbook, n *yaml.Node) {
	items, _ := d.list(n, "keychain")
	for i, item := range items {
		what := fmt.Sprintf("keychain[%d]", i)
		ps, ok := d.mapping(item, what)
		if !ok {
			continue
		}
		e := &KeychainEntry{Pos: d.pos(d.resolve(item))}
		for _, p := range ps {
			switch p.key {
			case "name":
				e.Name, _ = d.str(p.v, what+".name")
			case "kind":
				e.Kind, _ = d.str(p.v, what+".kind")
			default:
				if e.Fields == nil {
					e.Fields = make(map[string]any)
				}
				e.Fields[p.key] = d.plain(p.v)
			}
		}
		if e.Name == "" {
			d.errorAt(e.Pos, "%s: name is required", what)
		}
		pb.Keychain = append(pb.Keychain, e)
	}
}

// workbook decodes the workbook: named actions. NoETL writes an action as
// {name, tool: {kind, ...}, input, assert}; the older form puts the tool's
// keys on the entry itself ({name, kind, ...}).
func (d *decoder) workbook(pb *Playbook, n *yaml.Node) {
	items, _ := d.list(n, "workbook")
	for i, item := range items {
		what := fmt.Sprintf("workbook[%d]", i)
		item = d.resolve(item)
		ps, ok := d.mapping(item, what)
		if !ok || item == nil {
			continue
		}
		if !hasKey(ps, "tool") {
			if t := d.task(item, what, "", true); t != nil {
				pb.Workbook = append(pb.Workbook, t)
			}
			continue
		}
		var name string
		for _, p := range ps {
			if p.key == "name" {
				name, _ = d.str(p.v, what+".name")
			}
		}
		if name != "" {
			what = "workbook action " + name
		} else {
			d.errorf(item, "%s: name is required", what)
		}
		var t *Task
		var input, assert *yaml.Node
		for _, p := range ps {
			switch p.key {
			case "name":
			case "desc", "description":
			case "tool":
				d.field(p.k, what, "workbook.tool")
				tn := d.resolve(p.v)
				if tn != nil && tn.Kind == yaml.SequenceNode {
					d.errorf(tn, "%s: a workbook action's tool is one task mapping, not a pipeline", what)
					continue
				}
				t = d.task(tn, what+": tool", what+": ", false)
			case "input", "args":
				d.field(p.k, what, "workbook.input")
				input = p.v
			case "assert":
				d.field(p.k, what, "workbook.assert.expects")
				assert = p.v
			default:
				d.unknown(p.k, what, p.key)
			}
		}
		if t == nil {
			continue
		}
		t.Name = name
		if input != nil {
			// The entry's input holds defaults; the task's own input (if
			// any) wins over them, the call's input over both.
			defaults := d.valueOf(input, what+": input")
			if own := t.Config["input"]; own != nil {
				defaults = mergeMapValues(defaults, own)
			}
			t.setConfig("input", defaults, d.pos(input))
		}
		if assert != nil {
			t.Assert = d.assert(assert, what)
		}
		pb.Workbook = append(pb.Workbook, t)
	}
}

// mergeMapValues returns a map value with a's entries overridden by b's;
// b alone when either is not a map.
func mergeMapValues(a, b *Value) *Value {
	if a == nil || a.kind != valueMap || b == nil || b.kind != valueMap {
		return b
	}
	keys := append(a.Keys(), b.Keys()...)
	vals := make([]*Value, 0, len(keys))
	for _, k := range a.Keys() {
		vals = append(vals, a.Get(k))
	}
	for _, k := range b.Keys() {
		vals = append(vals, b.Get(k))
	}
	return NewMapValue(keys, vals, b.Pos)
}

func (d *decoder) assert(n *yaml.Node, what string) *Assert {
	ps, _ := d.mapping(n, what+": assert")
	a := &Assert{Pos: d.pos(d.resolve(n))}
	names := func(v *yaml.Node, field string) []string {
		items, _ := d.list(v, what+": assert."+field)
		var out []string
		for _, it := range items {
			if s, ok := d.str(it, what+": assert."+field+"[]"); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	for _, p := range ps {
		switch p.key {
		case "expects":
			a.Expects = names(p.v, p.key)
		case "returns":
			a.Returns = names(p.v, p.key)
		default:
			d.unknown(p.k, what+": assert", p.key)
		}
	}
	return a
}

// ---------------------------------------------------------------------------
// Steps

// stepKeys are the keys a step itself owns; with `tool: KIND` (a kind
// name) every other key of the step is the tool's configuration.
var stepKeys = map[string]bool{
	"step": true, "desc": true, "description": true, "when": true, "args": true, "input": true,
	"vars": true, "set": true, "loop": true, "tool": true, "next": true, "spec": true,
	"kind": true, "name": true, "task": true, "retry": true, "sink": true, "output": true,
}

func (d *decoder) step(n *yaml.Node) *Step {
	n = d.resolve(n)
	if d.isNull(n) {
		d.errorf(n, "workflow step is empty")
		return nil
	}
	ps, ok := d.mapping(n, "workflow step")
	if !ok || n == nil {
		return nil
	}
	s := &Step{Pos: d.pos(n)}
	// The name comes first so that every other message can use it.
	toolKind := ""
	for _, p := range ps {
		switch p.key {
		case "step":
			s.Name, _ = d.str(p.v, "step name")
		case "tool":
			if t := d.resolve(p.v); t != nil && t.Kind == yaml.ScalarNode && !d.isNull(t) {
				toolKind = t.Value
			}
		}
	}
	what := stepLabel(s)
	if s.Name == "" {
		d.errorf(n, "workflow step: step (its name) is required")
	}
	var argsSetBy map[string]string // arg name -> the key that set it
	var toolNode *yaml.Node
	var toolKeys []pair // the tool's fields written on the step (tool: KIND)
	for _, p := range ps {
		if toolKind != "" && !stepKeys[p.key] {
			toolKeys = append(toolKeys, p)
			continue
		}
		switch p.key {
		case "step":
		case "desc", "description":
			s.Desc, _ = d.str(p.v, what+": desc")
		case "when":
			s.When = d.template(p.v, what+": when")
		case "args", "input":
			d.args(&s.Args, &argsSetBy, p, what+": "+p.key, func(ap pair, prev string) {
				d.errorf(ap.k, "%s: argument %q is set in both %s and %s", what, ap.key, prev, p.key)
			})
		case "vars":
			s.Vars = d.valueMap(p.v, what+": vars")
		case "set":
			s.Set = d.assignments(p.v, what+": set")
		case "loop":
			s.Loop = d.loop(p.v, what)
		case "tool":
			toolNode = p.v
			if toolKind == "" {
				d.tool(s, p.v, what)
			}
			if !d.isNull(p.v) {
				if d.toolKeyed == nil {
					d.toolKeyed = make(map[*Step]bool)
				}
				d.toolKeyed[s] = true
			}
		case "next":
			s.Next = d.next(p.v, what)
		case "spec":
			d.stepSpec(s, p.v, what)
		case "kind":
			k, _ := d.str(p.v, what+": kind")
			if k != "workbook" {
				d.errorf(p.v, "%s: kind must be workbook (a tool goes under tool:), got %q", what, k)
				continue
			}
			s.Kind = k
		case "name", "task":
			s.TaskName, _ = d.str(p.v, what+": "+p.key)
		case "retry":
			s.Retry = d.retry(p.v, what+": retry")
		case "sink":
			s.Sink = d.sink(p.v, what+": sink")
		case "output":
			d.stepOutput(s, p.v, what)
		default:
			if s.Extra == nil {
				s.Extra = make(map[string]*Value)
			}
			s.Extra[p.key] = d.value(p.v)
			d.unknown(p.k, what, p.key)
		}
	}
	if toolKind != "" {
		t := &Task{Kind: toolKind, Pos: d.pos(d.resolve(toolNode))}
		for _, p := range toolKeys {
			t.setConfig(p.key, d.valueOf(p.v, what+": "+p.key), d.pos(p.k))
		}
		if toolKind == "workbook" {
			d.errorAt(t.Pos, "%s: tool: workbook needs a mapping {kind: workbook, name: ACTION}", what)
		}
		s.Tool = []*Task{t}
	}
	if s.Kind == "workbook" {
		if toolNode != nil {
			d.errorf(toolNode, "%s: a kind: workbook step cannot also have a tool", what)
		}
		if s.TaskName == "" {
			d.errorf(n, "%s: kind: workbook needs name: (the workbook task to run)", what)
		}
	} else if s.TaskName != "" && toolKind == "" {
		d.warnf(n, "%s: name/task %q is only used by kind: workbook steps", what, s.TaskName)
	}
	if s.Spec.LoopMode == ModeFanout {
		// NoETL's fan-out profile names it on the step.
		switch {
		case s.Loop == nil:
			d.warnf(n, "%s: spec.loop_mode fanout without a loop (ignored)", what)
		case s.Loop.Cursor != nil:
			d.errorf(n, "%s: spec.loop_mode fanout needs loop.in (a collection), not a cursor", what)
		default:
			s.Loop.Mode = ModeFanout
		}
	}
	d.lintLoopLimits(s, what)
	d.lintIterRefs(s, what)
	d.lintConcurrentCtx(s, what)
	d.lintLoopStepSetIter(s, what)
	d.lintSetStepScope(s, what)
	return s
}

// stepOutput decodes a step's output block: output_select is honoured,
// NoETL's storage tier settings are hints.
func (d *decoder) stepOutput(s *Step, n *yaml.Node, what string) {
	ps, _ := d.mapping(n, what+": output")
	for _, p := range ps {
		switch p.key {
		case "output_select", "select":
			items, _ := d.list(p.v, what+": output."+p.key)
			for _, it := range items {
				if k, ok := d.str(it, what+": output."+p.key+"[]"); ok && k != "" {
					s.OutputSelect = append(s.OutputSelect, k)
				}
			}
		case "store", "inline_max_bytes":
			s.OutputStore = d.outputStore(s.OutputStore, p, what, "step.output")
		default:
			d.unknown(p.k, what+": output", p.key)
		}
	}
}

// outputStore decodes one key (store or inline_max_bytes) of an output
// block into os (nil: a new one); field is the block's path in the table
// of fields (step.output or task.output).
func (d *decoder) outputStore(os *OutputStore, p pair, what, field string) *OutputStore {
	if os == nil {
		os = &OutputStore{Pos: d.pos(p.k)}
	}
	switch p.key {
	case "store":
		ps, _ := d.mapping(p.v, what+": output.store")
		for _, sp := range ps {
			if sp.key == "kind" {
				os.Kind, _ = d.str(sp.v, what+": output.store.kind")
				os.Pos = d.pos(sp.v)
				continue
			}
			d.field(sp.k, what, field+".store."+sp.key)
		}
	case "inline_max_bytes":
		os.InlineMaxBytes, _ = d.nonNegInt(p.v, what+": output.inline_max_bytes")
	}
	return os
}

// args decodes p, an args or input mapping labelled label, into *args.
// *setBy records the key (args or input) that set each argument; an
// argument set again is passed to dup, with the key that set it first,
// and skipped.
func (d *decoder) args(args *map[string]*Value, setBy *map[string]string, p pair, label string, dup func(ap pair, prev string)) {
	aps, _ := d.mapping(p.v, label)
	if len(aps) > 0 && *args == nil {
		*args = make(map[string]*Value, len(aps))
		*setBy = make(map[string]string, len(aps))
	}
	for _, ap := range aps {
		if prev, ok := (*setBy)[ap.key]; ok {
			dup(ap, prev)
			continue
		}
		(*setBy)[ap.key] = p.key
		(*args)[ap.key] = d.valueOf(ap.v, label+"."+ap.key)
	}
}

// stepLabel names a step in messages.
func stepLabel(s *Step) string {
	if s.Name == "" {
		return fmt.Sprintf("step at line %d", s.Pos.Line)
	}
	return "step " + s.Name
}

func (d *decoder) stepSpec(s *Step, n *yaml.Node, what string) {
	ps, _ := d.mapping(n, what+": spec")
	for _, p := range ps {
		switch p.key {
		case "timeout":
			if t, ok := d.templated(p.v, what+": spec.timeout"); ok {
				s.Spec.TimeoutTemplate = t
				continue
			}
			s.Spec.Timeout, _ = d.seconds(p.v, what+": spec.timeout")
		case "on_error":
			s.Spec.OnError, _ = d.str(p.v, what+": spec.on_error")
			// The engine reads continue and ignore; anything else fails
			// the step, so a value it does not know (skip, retry,
			// Continue) would fail the execution the user meant to get
			// past.
			switch s.Spec.OnError {
			case "", "fail", "continue", "ignore":
			default:
				d.errorf(p.v, "%s: bad spec.on_error %q (want fail, continue or ignore)", what, s.Spec.OnError)
			}
		case "pool":
			s.Spec.Pool, _ = d.str(p.v, what+": spec.pool")
		case "worker_labels":
			s.Spec.WorkerLabels = d.labels(p.v, what+": spec.worker_labels")
		case "loop_mode":
			s.Spec.LoopMode, _ = d.str(p.v, what+": spec.loop_mode")
			switch s.Spec.LoopMode {
			case "", "local", ModeFanout:
			default:
				d.errorf(p.v, "%s: bad spec.loop_mode %q (want fanout or local)", what, s.Spec.LoopMode)
			}
		case "policy":
			s.Spec.Policy, s.Spec.Admit = d.policy(p.v, what+": spec.policy")
		default:
			d.setSpecExtra(s, p.key, d.plain(p.v))
			d.unknown(p.k, what+": spec", p.key)
		}
	}
}

// boolean decodes a YAML boolean.
func (d *decoder) boolean(n *yaml.Node, what string) bool {
	n = d.resolve(n)
	if d.isNull(n) {
		return false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		d.errorf(n, "%s must be true or false, got %s", what, kindName(n))
		return false
	}
	return n.Value == "true" || n.Value == "True" || n.Value == "TRUE"
}

// labels decodes a mapping of label names to scalar values (written as
// strings: zone: eu, gpus: 2 → "2").
func (d *decoder) labels(n *yaml.Node, what string) map[string]string {
	pairs, ok := d.mapping(n, what)
	if !ok || len(pairs) == 0 {
		return nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		v := d.resolve(p.v)
		if v.Kind != yaml.ScalarNode || d.isNull(v) {
			d.errorf(v, "%s.%s must be a string, got %s", what, p.key, kindName(v))
			continue
		}
		out[p.key] = v.Value
	}
	return out
}

func (d *decoder) setSpecExtra(s *Step, key string, v any) {
	if s.Spec.Extra == nil {
		s.Spec.Extra = make(map[string]any)
	}
	s.Spec.Extra[key] = v
}

// tool decodes a step's tool: one task mapping or a pipeline list.
func (d *decoder) tool(s *Step, n *yaml.Node, what string) {
	n = d.resolve(n)
	if d.isNull(n) {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		if t := d.task(n, what+": tool", what+": ", false); t != nil {
			s.Tool = []*Task{t}
		}
	case yaml.SequenceNode:
		s.Pipeline = true
		seen := make(map[string]bool)
		for i, item := range n.Content {
			item = d.resolve(item)
			// NoETL's older shorthand: `- task_name: {kind: ..., ...}`.
			named := ""
			if item != nil && item.Kind == yaml.MappingNode && len(item.Content) == 2 {
				k, v := d.resolve(item.Content[0]), d.resolve(item.Content[1])
				if k != nil && v != nil && k.Kind == yaml.ScalarNode && k.Value != "name" && k.Value != "kind" && v.Kind == yaml.MappingNode {
					named, item = k.Value, v
				}
			}
			t := d.task(item, fmt.Sprintf("%s: tool[%d]", what, i), what+": ", named == "")
			if t == nil {
				continue
			}
			if named != "" && t.Name == "" {
				t.Name = named
			}
			if t.Name != "" {
				if seen[t.Name] {
					d.errorAt(t.Pos, "%s: duplicate pipeline task name %q", what, t.Name)
				}
				seen[t.Name] = true
			}
			s.Tool = append(s.Tool, t)
		}
		if len(n.Content) == 0 {
			d.errorf(n, "%s: tool pipeline is empty", what)
		}
	default:
		d.errorf(n, "%s: tool must be a mapping, a list of tasks or a tool kind, got %s", what, kindName(n))
	}
}

// task decodes a tool invocation. what labels it in messages until its
// name is known; prefix is prepended to "task NAME" once it is. named says
// the task needs a name (pipeline entries and workbook tasks).
func (d *decoder) task(n *yaml.Node, what, prefix string, named bool) *Task {
	n = d.resolve(n)
	ps, ok := d.mapping(n, what)
	if !ok || n == nil {
		return nil
	}
	t := &Task{Pos: d.pos(n)}
	var actionKey *yaml.Node
	for _, p := range ps {
		switch p.key {
		case "name":
			t.Name, _ = d.str(p.v, what+".name")
		case "kind":
			t.Kind, _ = d.str(p.v, what+".kind")
		case "action":
			actionKey = p.v
		}
	}
	if t.Kind == "workbook" {
		// A workbook call names the action with name (a single tool) or,
		// in a pipeline where name labels the task, with action.
		switch {
		case actionKey != nil:
			t.Action, _ = d.str(actionKey, what+".action")
		case !named || t.Name != "":
			t.Action = t.Name
		}
		if !named {
			t.Name = ""
		}
		if t.Action == "" {
			d.errorAt(t.Pos, "%s: a workbook call needs name: (the workbook action to run)", what)
		}
	}
	// cfg labels the tool's own configuration keys in messages.
	cfg := what + "."
	if t.Name != "" {
		what = prefix + "task " + t.Name
		cfg = what + ": "
	}
	for _, p := range ps {
		switch p.key {
		case "kind":
		case "name":
			// A single tool's name labels it and is also the tool's own
			// key (the secrets tool's alias, a noop's field), as NoETL
			// hands a tool every key of its mapping. A pipeline task's
			// name only labels it.
			if !named && t.Kind != "workbook" {
				t.setConfig(p.key, d.valueOf(p.v, cfg+p.key), d.pos(p.k))
			}
		case "action":
			if t.Kind != "workbook" {
				t.setConfig(p.key, d.valueOf(p.v, cfg+p.key), d.pos(p.k))
			}
		case "spec":
			sps, _ := d.mapping(p.v, what+": spec")
			for _, sp := range sps {
				switch sp.key {
				case "policy":
					var admit *Policy
					t.Policy, admit = d.policy(sp.v, what+": spec.policy")
					if admit != nil {
						d.refuse(sp.k, what+": spec.policy.admit applies to steps, not tasks (refused at run)")
					}
				case "timeout":
					if tt, ok := d.templated(sp.v, what+": spec.timeout"); ok {
						t.TimeoutTemplate = tt
						continue
					}
					t.Timeout, _ = d.seconds(sp.v, what+": spec.timeout")
				default:
					d.unknown(sp.k, what+": spec", sp.key)
				}
			}
		case "set":
			t.Set = d.assignments(p.v, what+": set")
		case "retry":
			t.Retry = d.retry(p.v, what+": retry")
		case "sink":
			t.Sink = d.sink(p.v, what+": sink")
		case "output":
			ops, _ := d.mapping(p.v, what+": output")
			for _, op := range ops {
				switch op.key {
				case "store", "inline_max_bytes":
					t.OutputStore = d.outputStore(t.OutputStore, op, what, "task.output")
				default:
					d.unknown(op.k, what+": output", op.key)
				}
			}
		case "output_select":
			d.field(p.k, what, "task.output_select")
		default:
			t.setConfig(p.key, d.valueOf(p.v, cfg+p.key), d.pos(p.k))
		}
	}
	if named && t.Name == "" {
		d.errorAt(t.Pos, "%s: name is required", what)
	}
	if t.Kind == "" {
		d.errorAt(t.Pos, "%s: kind is required", what)
	}
	return t
}

// setConfig sets a key of the task's configuration, written at pos.
func (t *Task) setConfig(key string, v *Value, pos Pos) {
	if t.Config == nil {
		t.Config = make(map[string]*Value)
	}
	if t.KeyPos == nil {
		t.KeyPos = make(map[string]Pos)
	}
	t.Config[key] = v
	t.KeyPos[key] = pos
}
