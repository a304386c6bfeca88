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
// change which part of the key is hashed.
func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidName, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %q is not UTF-8", ErrInvalidName, name)
	case strings.ContainsAny(name, "{}"):
		return fmt.Errorf("%w: %q contains a brace", ErrInvalidName, name)
	case strings.ContainsFunc(name, unicode.IsControl):
		return fmt.Errorf("%w: %q contains a control character", ErrInvalidName, name)
	}
	return nil
}

// validatePrefix checks a key prefix: like a name, but it may be empty.
func validatePrefix(p string) error {
	if p == "" {
		return nil
	}
	if err := validateName(p); err != nil {
		return fmt.Errorf("%w: prefix: %v", ErrInvalidOption, err)
	}
	return nil
}
