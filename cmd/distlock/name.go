package main

import (
	"fmt"
	"strings"
	"unicode"
)

// checkName refuses a lock name with a bidirectional control character
// (U+202E RIGHT-TO-LEFT OVERRIDE and the like): such a name can print as
// another one in the output of status and list. The library checks the
// rest (see distlock.ErrInvalidName).
func checkName(name string) error {
	if i := strings.IndexFunc(name, isBidiControl); i >= 0 {
		r := []rune(name[i:])[0]
		return exitf(exitBadName, "invalid lock name %q: it contains the bidirectional control character U+%04X, which can make it print as another name", name, r)
	}
	return nil
}

// isBidiControl reports whether r is one of the characters that change
// the direction of the text around them.
func isBidiControl(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) }

// printableName is name as it can be printed in a table: itself, or
// quoted with escapes if it holds characters that are not graphic, such
// as bidirectional controls in a name made with the library.
func printableName(name string) string {
	if strings.IndexFunc(name, func(r rune) bool { return !unicode.IsGraphic(r) }) >= 0 {
		return fmt.Sprintf("%q", name)
	}
	return name
}
