//go:build unix

package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/distlock/distlock"
)

// TestExitStatus checks the statuses of the library's errors, as they
// come wrapped.
func TestExitStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"not acquired", fmt.Errorf("lock %q: %w", "x", distlock.ErrNotAcquired), exitNotAcquired},
		{"wrong kind", fmt.Errorf("lock %q: %w", "x", distlock.ErrWrongKind), exitWrongKind},
		// The library wraps ErrBackend around ErrWrongKind, though Redis
		// answered.
		{"wrong kind from the backend", fmt.Errorf("lock %q: %w: %w", "x", distlock.ErrBackend, distlock.ErrWrongKind), exitWrongKind},
		{"backend", fmt.Errorf("lock %q: %w: %w", "x", distlock.ErrBackend, errors.New("connection refused")), exitUnavailable},
		{"lost", fmt.Errorf("lock %q: %w", "x", distlock.ErrLockLost), exitLockLost},
	}
	for _, tt := range tests {
		if got := exitStatus(tt.err); got != tt.want {
			t.Errorf("%s: exitStatus(%q) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}
