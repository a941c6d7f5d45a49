package tools

import "slices"

// ConfigKeyLister is implemented by a tool whose configuration keys are a
// closed set: ConfigKeys lists every key of Call.Config the tool reads,
// aliases included (command, query and sql for the SQL, say). A key a
// task sets outside that list has no effect on the call, so the engine's
// lint (engine.Lint) warns about it — a typo such as parms for params
// would otherwise be ignored in silence and fail, if at all, far from
// its cause.
//
// A tool that hands its whole configuration on (noop echoes it; a host
// function may read keys of its own choosing) does not implement it, and
// its keys go unchecked. The list only warns, it never refuses: NoETL
// playbooks may carry keys meant for NoETL's own tools.
type ConfigKeyLister interface {
	// ConfigKeys returns the keys of Call.Config the tool reads. The
	// caller may keep and change the slice.
	ConfigKeys() []string
}

// ConfigKeys returns the configuration keys t reads and true when t
// implements ConfigKeyLister, else nil and false (its keys are open).
func ConfigKeys(t Tool) ([]string, bool) {
	l, ok := t.(ConfigKeyLister)
	if !ok {
		return nil, false
	}
	return slices.Clone(l.ConfigKeys()), true
}

// ConfigSynonymLister is implemented by a tool some of whose configuration
// keys are synonyms: keys that set one value, of which the tool reads the
// first present (url or endpoint; command, query or sql). A task that sets
// two of a group gets the first only, so the engine's lint (engine.Lint)
// warns about the others, which are accepted and have no effect.
type ConfigSynonymLister interface {
	// ConfigSynonyms returns the groups of synonymous keys, each in the
	// order the tool reads them. The caller may keep and change them.
	ConfigSynonyms() [][]string
}

// ConfigSynonyms returns the groups of synonymous configuration keys of t
// when t implements ConfigSynonymLister, else nil.
func ConfigSynonyms(t Tool) [][]string {
	l, ok := t.(ConfigSynonymLister)
	if !ok {
		return nil
	}
	groups := l.ConfigSynonyms()
	out := make([][]string, len(groups))
	for i, g := range groups {
		out[i] = slices.Clone(g)
	}
	return out
}

// AliasKeys returns the config keys AliasOf reads, in the order it tries
// them; the caller may keep and change the slice.
func AliasKeys() []string { return []string{"auth", "credential", "credentials"} }

// AliasOf returns the keychain alias a tool's config names under auth or
// credential (AliasKeys()). Besides a plain string it accepts NoETL's object
// forms {credential|key|alias|name: alias} and a one-entry map
// {name: {...}}.
func AliasOf(cfg map[string]any) (string, bool) {
	for _, k := range AliasKeys() {
		if v, ok := cfg[k]; ok {
			return aliasOf(v, 0)
		}
	}
	return "", false
}

func aliasOf(v any, depth int) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, v != ""
	case map[string]any:
		for _, k := range []string{"credential", "key", "alias", "name"} {
			if s, ok := v[k].(string); ok && s != "" {
				return s, true
			}
		}
		if len(v) == 1 && depth == 0 {
			for k, inner := range v {
				if k == "type" {
					break // {type: bearer} names a kind of auth, not a credential
				}
				return aliasOf(inner, depth+1)
			}
		}
	}
	return "", false
}
