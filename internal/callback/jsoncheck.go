package callback

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Limits on what a payload may look like before anything parses it.
const (
	// MaxJSONDepth bounds nesting (objects and arrays).
	MaxJSONDepth = 64
	// MaxNumberLen bounds a number literal: nothing we store needs more
	// than an int64 or a float64 holds.
	MaxNumberLen = 40
)

// Reasons a hostile or broken payload is refused.
var (
	ErrInvalidUTF8   = errors.New("body is not valid UTF-8")
	ErrTooDeep       = fmt.Errorf("JSON nesting is deeper than %d levels", MaxJSONDepth)
	ErrNumberTooLong = fmt.Errorf("JSON number longer than %d characters", MaxNumberLen)
)

// CheckJSONShape refuses invalid UTF-8, nesting deeper than MaxJSONDepth and
// number literals longer than MaxNumberLen, in one pass without allocating,
// so that a hostile body is turned away before a decoder spends memory or
// stack on it. It does not validate the JSON grammar (the extractor does).
func CheckJSONShape(body []byte) error {
	if !utf8.Valid(body) {
		return ErrInvalidUTF8
	}
	depth, num := 0, 0
	inString, escaped := false, false
	for _, c := range body {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			num = 0
		case '{', '[':
			depth++
			if depth > MaxJSONDepth {
				return ErrTooDeep
			}
			num = 0
		case '}', ']':
			depth--
			num = 0
		case '-', '+', '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			num++
			if num > MaxNumberLen {
				return ErrNumberTooLong
			}
		default:
			num = 0
		}
	}
	return nil
}
