package ir

import (
	"fmt"
	"unicode/utf8"
)

// The TOML parser's time and memory grow with the square of how deeply keys
// and values nest: a 200 KB line of "a = {b = {c = …" takes gigabytes. The
// model format never needs much nesting, so checkNesting rejects deep text
// before the parser sees it.
const (
	// maxKeyDepth bounds the segments of a full key path: those of the
	// [table] header, of a dotted key and of the keys of enclosing inline
	// tables. [[module.module.…]] headers reach maxNesting.
	maxKeyDepth = maxNesting + 16
	// maxValueDepth bounds arrays and inline tables inside one another.
	maxValueDepth = 2*maxNesting + 16
)

// checkNesting scans TOML text and returns the position (and byte offset)
// of the first key or value that nests deeper than the limits, and what is
// wrong there; msg is "" when the text is within them. It follows just enough of TOML (strings,
// comments, headers, keys, arrays, inline tables) to count; text that is
// not TOML at all is left to the parser to report.
func checkNesting(src []byte) (pos Pos, off int, msg string) {
	const (
		stKey    = iota // reading a key: at the start of a line, after { or ,
		stValue         // after =
		stHeader        // inside [table] or [[table]]
		stRest          // after a header, until the end of the line
	)
	type frame struct {
		table    bool // an inline table, else an array
		keyDepth int  // key depth of the value the container is
	}
	var stack []frame
	line, lineStart := 1, 0
	state := stKey
	header := 0       // segments of the current [table] header
	keyBase := 0      // key depth the key being read extends
	segs := 0         // segments of the key being read so far
	expectSeg := true // the next key character starts a segment
	valDepth := 0     // key depth of the value being read
	at := func(i int) Pos { return Pos{Line: line, Col: utf8.RuneCount(src[lineStart:i]) + 1} }
	startKey := func(base int) {
		state, keyBase, segs, expectSeg = stKey, base, 0, true
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '\n':
			line, lineStart = line+1, i+1
			if len(stack) == 0 {
				startKey(header)
			}
			continue
		case ' ', '\t', '\r':
			continue
		case '#':
			for i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
			continue
		}
		switch state {
		case stKey, stHeader:
			switch {
			case c == '[' && state == stKey && len(stack) == 0 && segs == 0:
				state, keyBase, segs, expectSeg = stHeader, 0, 0, true
				if i+1 < len(src) && src[i+1] == '[' {
					i++
				}
			case c == ']' && state == stHeader:
				header, state = segs, stRest
			case c == '.':
				expectSeg = true
			case c == '=' && state == stKey:
				state, valDepth = stValue, keyBase+segs
			case c == '}' && state == stKey && len(stack) > 0 && stack[len(stack)-1].table:
				// An empty inline table or a trailing comma.
				stack = stack[:len(stack)-1]
				state = stValue
			default:
				if expectSeg {
					expectSeg = false
					segs++
					if keyBase+segs > maxKeyDepth {
						return at(i), i, fmt.Sprintf("keys nest deeper than %d levels (counting the [table] header, dotted keys and enclosing inline tables)", maxKeyDepth)
					}
				}
				if c == '"' || c == '\'' {
					i = skipString(src, i, &line, &lineStart)
				}
			}
		case stValue:
			switch c {
			case '"', '\'':
				i = skipString(src, i, &line, &lineStart)
			case '[', '{':
				if len(stack) >= maxValueDepth {
					return at(i), i, fmt.Sprintf("arrays and inline tables nest deeper than %d levels", maxValueDepth)
				}
				stack = append(stack, frame{table: c == '{', keyDepth: valDepth})
				if c == '{' {
					startKey(valDepth)
				}
			case ']', '}':
				if len(stack) > 0 && stack[len(stack)-1].table == (c == '}') {
					stack = stack[:len(stack)-1]
				}
				if len(stack) > 0 {
					valDepth = stack[len(stack)-1].keyDepth
				}
			case ',':
				if len(stack) > 0 && stack[len(stack)-1].table {
					startKey(stack[len(stack)-1].keyDepth)
				}
			}
		}
	}
	return Pos{}, 0, ""
}

// skipString returns the index of the last byte of the TOML string that
// starts at src[i], counting the lines it spans.
func skipString(src []byte, i int, line, lineStart *int) int {
	q := src[i]
	multi := i+2 < len(src) && src[i+1] == q && src[i+2] == q
	if multi {
		i += 3
	} else {
		i++
	}
	for ; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\\' && q == '"':
			i++
			if i < len(src) && src[i] == '\n' {
				*line, *lineStart = *line+1, i+1
			}
		case c == '\n':
			if !multi {
				return i - 1 // unterminated: the parser reports it
			}
			*line, *lineStart = *line+1, i+1
		case c == q:
			if !multi {
				return i
			}
			if i+2 < len(src) && src[i+1] == q && src[i+2] == q {
				i += 2
				for i+1 < len(src) && src[i+1] == q { // up to two quotes end the content
					i++
				}
				return i
			}
		}
	}
	return len(src) - 1
}
