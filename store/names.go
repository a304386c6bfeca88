package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest lock name, in bytes.
const MaxNameLen = 512

// ErrInvalidName: the lock name is empty, too long, not UTF-8, or
// contains braces or control characters. Package distlock exports the
// same value.
var ErrInvalidName = errors.New("invalid lock name")

// CheckName checks a lock name, as every operation of package distlock
// does before any request: 1 to MaxNameLen bytes of UTF-8 without control
// characters or braces (the name is the Redis Cluster hash tag of every
// key of the lock: a brace inside it would change which part of the key
// is hashed). The error wraps ErrInvalidName, and says what is wrong
// without repeating the name.
func CheckName(name string) error {
	var problem string
	switch {
	case name == "":
		problem = "empty"
	case len(name) > MaxNameLen:
		problem = fmt.Sprintf("%d bytes, more than %d", len(name), MaxNameLen)
	case !utf8.ValidString(name):
		problem = "not UTF-8"
	case strings.ContainsAny(name, "{}"):
		problem = "contains a brace"
	case strings.ContainsFunc(name, unicode.IsControl):
		problem = "contains a control character"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidName, problem)
}
