package dsl

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// yaml11Bools are the plain scalars that YAML 1.1 reads as booleans and
// YAML 1.2 as strings, beyond true and false: PyYAML's resolver, which
// NoETL's Python engine loads playbooks with.
var yaml11Bools = map[string]bool{
	"yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"no": false, "No": false, "NO": false, "off": false, "Off": false, "OFF": false,
}

// readYAML11Bools makes the plain (unquoted, untagged) values yes, no, on
// and off, in any of PyYAML's spellings, the booleans NoETL reads them as
// (`enabled: no` is false there, and "no" would be true in a template
// test here), warning at each so that an author who meant the text quotes
// it. Keys are left as they are: they name fields.
func (d *decoder) readYAML11Bools(root *yaml.Node) {
	stack := []*yaml.Node{root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			stack = append(stack, n.Content...)
		case yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				stack = append(stack, n.Content[i])
			}
		case yaml.ScalarNode:
			if n.Style == 0 && (n.Tag == "!!float" || n.Tag == "!!int") && leadingZeroDecimal(n.Value) {
				// 02139: not an octal number, so text to PyYAML (a zip
				// code), where YAML 1.2 reads 2139.
				n.Tag = "!!str"
				continue
			}
			b, ok := yaml11Bools[n.Value]
			if !ok || n.Style != 0 || n.Tag != "!!str" {
				continue
			}
			word := n.Value
			n.Tag, n.Value = "!!bool", "false"
			if b {
				n.Value = "true"
			}
			d.warnf(n, "%s is read as %s, as NoETL (YAML 1.1) reads it; quote it ('%s') for the text", word, n.Value, word)
		}
	}
}

// leadingZeroDecimal reports whether s is digits (and underscores, after
// an optional sign) that start with 0 and hold an 8 or a 9: neither
// YAML 1.1's octal number nor its decimal one.
func leadingZeroDecimal(s string) bool {
	s = strings.TrimLeft(s, "+-")
	if len(s) < 2 || s[0] != '0' || !strings.ContainsAny(s, "89") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '_' {
			return false
		}
	}
	return true
}
