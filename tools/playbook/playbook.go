// Package playbook provides the sub-playbook tool: a step whose tool is
// `kind: playbook` runs another playbook as a child execution and takes
// the child's outcome as its output.
//
//	workflow:
//	  - step: enrich
//	    tool:
//	      kind: playbook
//	      path: ./enrich.yaml      # relative to the parent playbook's file
//	      workload:                # overrides of the child's workload
//	        customer_id: '{{ iter.customer.id }}'
//
// The child's execution id is derived from the parent's command, so a
// retried or resumed call re-attaches to the same child instead of
// starting it again.
//
// The calling step holds no worker while its child runs: the tool starts
// the child and returns a *tools.AwaitExecution, the engine parks the
// command until the child's terminal event and then runs the task again,
// which finds the child finished and returns its outcome. (Rows of a
// cursor frame cannot be parked: there the tool waits for the child. So
// does a step or task with a spec.timeout, which a parked command could
// not keep: when the time is up the step fails and the child is
// cancelled. The wait restarts if the call is run again after a
// worker's loss.)
//
// The path may name any file the process can read (an absolute path, or
// ../ out of the parent's directory). Register the tool
// where the playbooks' authors are trusted with this machine's files (the
// CLI's local run does); a server that takes playbooks from strangers
// does not register it (examples/server does not).
package playbook

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/cursorflow/cursorflow/tools"
)

// Request asks a Runner to run a child playbook.
type Request struct {
	// ParentExecutionID and CommandID identify the calling command.
	ParentExecutionID string
	CommandID         string
	// Task names the calling task of a pipeline ("" for a single tool)
	// and Attempt is its attempt (0 or 1: the first): each task, and each
	// retry of one, has a child of its own, while a resumed call of the
	// same attempt re-attaches to its child.
	Task    string
	Attempt int
	// Path names the child playbook as written in the step.
	Path string
	// Workload overrides the child's workload keys.
	Workload map[string]any
	// Await asks the Runner not to wait for a child that has not ended:
	// it returns the Result with Status StatusRunning instead.
	Await bool
}

// StatusRunning is the Status of a Result for a child that has not ended
// (Request.Await).
const StatusRunning = "running"

// Result is a finished child execution.
type Result struct {
	ExecutionID string
	// Status is completed, failed or cancelled.
	Status string
	// Error describes a failure.
	Error string
	// Steps holds each child step's result by name.
	Steps map[string]any
}

// ChildPath returns the file a call's path names: a relative path is
// read next to the parent playbook's file (parentFile; when that is
// unknown, as written).
func ChildPath(parentFile, path string) string {
	if filepath.IsAbs(path) || parentFile == "" {
		return path
	}
	return filepath.Join(filepath.Dir(parentFile), path)
}

// Runner runs child executions; the engine implements it.
type Runner interface {
	RunPlaybook(ctx context.Context, req Request) (Result, error)
}

// New returns the playbook tool backed by r.
func New(r Runner) tools.Tool {
	return tool{tools.ToolFunc(func(ctx context.Context, call *tools.Call) (tools.Output, error) {
		path, _ := call.Config["path"].(string)
		if path == "" {
			path, _ = call.Config["playbook"].(string)
		}
		if path == "" {
			return tools.Output{}, fmt.Errorf("playbook tool: step %s: path is required", call.Step)
		}
		workload := map[string]any{}
		for _, key := range []string{"workload", "args", "input"} {
			if m, ok := call.Config[key].(map[string]any); ok {
				for k, v := range m {
					workload[k] = v
				}
			}
		}
		res, err := r.RunPlaybook(ctx, Request{ParentExecutionID: call.ExecutionID, CommandID: call.CommandID,
			Task: call.Task, Attempt: call.Attempt, Path: path, Workload: workload, Await: call.Await})
		if err != nil {
			return tools.Output{}, err
		}
		if res.Status == StatusRunning {
			return tools.Output{}, &tools.AwaitExecution{ExecutionID: res.ExecutionID}
		}
		data := map[string]any{"execution_id": res.ExecutionID, "status": res.Status, "steps": res.Steps}
		if res.Status != "completed" {
			msg := res.Error
			if msg == "" {
				msg = "child execution " + res.Status
			}
			return tools.Output{Status: tools.StatusError, Data: data, Error: msg}, nil
		}
		return tools.Output{Status: tools.StatusSuccess, Data: data}, nil
	})}
}

// tool is the playbook tool: its function, and the keys it reads.
type tool struct{ tools.ToolFunc }

// ConfigKeys implements tools.ConfigKeyLister: path (or playbook) names
// the child; workload, args and input are merged, in that order, into the
// child's workload.
func (tool) ConfigKeys() []string {
	return []string{"path", "playbook", "workload", "args", "input"}
}

// ConfigSynonyms implements tools.ConfigSynonymLister (workload, args and
// input are merged, not synonyms).
func (tool) ConfigSynonyms() [][]string {
	return [][]string{{"path", "playbook"}}
}
