//go:build !faultpoint

package faultpoint

// Enabled reports whether this binary was built with the faultpoint tag.
const Enabled = false

// Hit does nothing: the binary was built without the faultpoint tag.
func Hit(string) {}
