// Command genfields writes dsl.FieldsMarkdown to the file named by its
// argument (docs/playbook-fields.md; see go generate ./dsl).
package main

import (
	"fmt"
	"os"

	"github.com/cursorflow/cursorflow/dsl"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genfields OUTPUT.md")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], []byte(dsl.FieldsMarkdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
