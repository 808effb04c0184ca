package main

import (
	"fmt"
	"io"
)

func runImport(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "fsdpc import: not built yet")
	return 1
}
