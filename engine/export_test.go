package engine

// Retained reports how many entries the engine's per-execution structures
// hold, by name. Call it after Close (the orchestrator's loop owns some of
// them while it runs): each should be back to zero (finished: at most
// MaxFinished) once no execution runs, however many ran before.
func Retained(e *Engine) map[string]int {
	o := e.orch
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	e.running.mu.Lock()
	defer e.running.mu.Unlock()
	return map[string]int{"execs": len(o.execs), "children": len(o.children), "reloading": len(o.reloading), "ended": len(o.ended),
		"orphaned": len(o.orphaned), "driving": len(o.driving), "waiters": len(o.waiters),
		"finished": o.finished.len(), "running": len(e.running.m)}
}
