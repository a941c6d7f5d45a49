package tools

// Disabler is implemented by a registered tool that refuses every call
// where it is registered: a kind that runs code or touches local files,
// which its host did not enable (tools/builtin's python, shell and duckdb
// stand-ins). Its kind is known, so a worker's lint checks its tasks, but
// an engine that runs its own tools refuses a playbook using it before
// anything runs (engine.Check), as it refuses a kind it has no tool for,
// instead of running the steps before and failing at the first that
// needs it.
type Disabler interface {
	// Disabled says why the kind does not run here and how a host
	// enables it.
	Disabled() string
}

// Disabled returns why t refuses every call and true when t implements
// Disabler, else "" and false.
func Disabled(t Tool) (string, bool) {
	d, ok := t.(Disabler)
	if !ok {
		return "", false
	}
	return d.Disabled(), true
}
