package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cursorflow/cursorflow/tools/playbook"
)

// RunPlaybook implements playbook.Runner: it starts (or, after a retry or a
// resume, re-attaches to) the child execution derived from the calling
// command and waits for it.
func (e *Engine) RunPlaybook(ctx context.Context, req playbook.Request) (playbook.Result, error) {
	childID := req.ParentExecutionID + "/" + req.CommandID
	parentFile := ""
	if events, err := e.cfg.Log.Read(ctx, req.ParentExecutionID, 0, 1); err == nil && len(events) == 1 {
		var p startedPayload
		if decode(events[0], &p) == nil {
			parentFile = p.File
		}
	}
	existing, err := e.cfg.Log.Read(ctx, childID, 0, 1)
	if err != nil {
		return playbook.Result{}, err
	}
	if len(existing) > 0 {
		if err := e.Resume(ctx, childID); err != nil {
			return playbook.Result{}, fmt.Errorf("sub-playbook %s: resume %s: %w", req.Path, childID, err)
		}
	} else {
		path := req.Path
		if !filepath.IsAbs(path) && parentFile != "" {
			path = filepath.Join(filepath.Dir(parentFile), path)
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return playbook.Result{}, fmt.Errorf("sub-playbook: %w", err)
		}
		if _, err := e.Start(ctx, src, StartOptions{File: path, Workload: req.Workload, ExecutionID: childID, Parent: req.ParentExecutionID}); err != nil {
			return playbook.Result{}, fmt.Errorf("sub-playbook %s: %w", req.Path, err)
		}
	}
	sum, err := e.Wait(ctx, childID)
	if err != nil {
		return playbook.Result{}, err
	}
	return playbook.Result{ExecutionID: childID, Status: sum.Status, Error: sum.Error, Steps: sum.Results}, nil
}

var _ playbook.Runner = (*Engine)(nil)
