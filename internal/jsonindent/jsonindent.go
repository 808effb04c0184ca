// Package jsonindent indents the compact JSON that encoding/json writes,
// as json.Indent does but faster: the readers of the largest plans (show
// -json, reshard -reads -format json) write gigabytes of it.
package jsonindent

import (
	"bytes"
	"fmt"
)

// Compact writes compact JSON src to dst as json.Indent does (no
// prefix before the first line, "[]" and "{}" kept on one line), in one
// pass without json's scanner, over twice as fast on the operations of
// show -json: src is json.Marshal's output, so it is valid and has no
// space outside strings. Text that is not (a string left
// open) is an error, never a panic.
func Compact(dst *bytes.Buffer, src []byte, prefix, indent string) error {
	depth := 0
	newline := func() {
		dst.WriteByte('\n')
		dst.WriteString(prefix)
		for range depth {
			dst.WriteString(indent)
		}
	}
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"':
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return fmt.Errorf("internal error: unterminated string in JSON %.40q", src)
			}
			dst.Write(src[i : j+1])
			i = j
		case '{', '[':
			dst.WriteByte(c)
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				dst.WriteByte(src[i+1])
				i++
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			dst.WriteByte(c)
		case ',':
			dst.WriteByte(c)
			newline()
		case ':':
			dst.WriteString(": ")
		default:
			j := i + 1
			for j < len(src) && !structural(src[j]) {
				j++
			}
			dst.Write(src[i:j])
			i = j - 1
		}
	}
	return nil
}

// structural reports whether c starts or ends a JSON string or value, or
// separates values: what Compact acts on.
func structural(c byte) bool {
	switch c {
	case '"', '{', '}', '[', ']', ',', ':':
		return true
	}
	return false
}
