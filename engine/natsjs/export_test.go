package natsjs

// CachedPlaybooks is how many parsed playbooks w holds.
func CachedPlaybooks(w *Worker) int { return w.playbooks.Len() }

// StoredPlaybooks is how many playbook hashes d remembers having stored.
func StoredPlaybooks(d *Dispatcher) int { return d.stored.Len() }

// MaxCachedPlaybooks is the bound of both.
const MaxCachedPlaybooks = maxCachedPlaybooks

// SplitID splits a command id into its base and attempt ("c1@3": c1, 3),
// as the dispatcher reads ids.
var SplitID = splitID
