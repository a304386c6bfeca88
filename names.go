package distlock

import "github.com/distlock/distlock/store"

// MaxNameLen is the longest lock name, in bytes.
const MaxNameLen = store.MaxNameLen

// validateName checks a lock name: 1 to MaxNameLen bytes of UTF-8 without
// control characters or braces (store.CheckName). The error does not
// repeat the name: the operation that returns it does.
func validateName(name string) error { return store.CheckName(name) }
