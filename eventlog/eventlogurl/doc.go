// Package eventlogurl opens an eventlog.Log named by a URL, for programs
// that pick their store from configuration. It imports every backend; a
// program that knows its backend imports just that one instead.
package eventlogurl
