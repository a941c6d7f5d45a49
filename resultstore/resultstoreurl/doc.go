// Package resultstoreurl opens a resultstore.Store named by a URL, for
// programs that pick their store from configuration (the CLI's
// --result-store, the example server's and worker's). It registers
// gocloud's file://, mem:// and s3:// drivers; a program that needs only
// one opens its bucket itself and calls resultstore.New.
package resultstoreurl
