package dsl

// Diagnostic is one problem found in a playbook.
type Diagnostic struct {
	Pos     Pos
	Message string
	// Warning is true for findings that do not make the playbook invalid
	// (unknown keys, for example).
	Warning bool
}

// Error formats the diagnostic as file:line:col: message.
func (d *Diagnostic) Error() string { return d.Pos.String() + ": " + d.Message }

// ErrorList is every error found in one playbook; Parse returns it as its
// error when validation fails. Use errors.As to reach it.
type ErrorList []*Diagnostic

// Error joins the diagnostics, one per line.
func (l ErrorList) Error() string {
	s := ""
	for i, d := range l {
		if i > 0 {
			s += "\n"
		}
		s += d.Error()
	}
	return s
}

// Parse parses and validates a playbook. file names the source in
// positions. On failure the error is an ErrorList holding every problem.
func Parse(file string, src []byte) (*Playbook, error) {
	panic("dsl: Parse not implemented yet")
}

// ParseFile reads and parses the playbook at path.
func ParseFile(path string) (*Playbook, error) {
	panic("dsl: ParseFile not implemented yet")
}
