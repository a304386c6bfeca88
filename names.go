package distlock

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest lock name, in bytes.
const MaxNameLen = 512

// validateName checks a lock name: 1 to MaxNameLen bytes of UTF-8 without
// control characters or braces. Braces are refused because the name is the
// Redis Cluster hash tag of every key of the lock: a brace inside it would
// change which part of the key is hashed. The error does not repeat the
// name: the operation that returns it does.
func validateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if problem := nameProblem(name); problem != "" {
		return fmt.Errorf("%w: %s", ErrInvalidName, problem)
	}
	return nil
}

// nameProblem says what is wrong with s as a lock name, or returns "".
func nameProblem(s string) string {
	switch {
	case len(s) > MaxNameLen:
		return fmt.Sprintf("%d bytes, more than %d", len(s), MaxNameLen)
	case !utf8.ValidString(s):
		return "not UTF-8"
	case strings.ContainsAny(s, "{}"):
		return "contains a brace"
	case strings.ContainsFunc(s, unicode.IsControl):
		return "contains a control character"
	}
	return ""
}
