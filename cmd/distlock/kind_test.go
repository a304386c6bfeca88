package main

import (
	"strings"
	"testing"

	"github.com/distlock/distlock"
)

// TestKindNames checks that the command names each kind of lock as the
// library does (distlock.Kind), in status, list and their JSON, and in
// the messages that name a kind with the flags of run that take it.
func TestKindNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind lockKind
		want distlock.Kind
	}{
		{kindNone, distlock.KindFree},
		{kindMutex, distlock.KindMutex},
		{kindFairMutex, distlock.KindFairMutex},
		{kindRWMutex, distlock.KindRWMutex},
		{kindSemaphore, distlock.KindSemaphore},
		{kindElection, distlock.KindElection},
	}
	for _, tt := range tests {
		if got := tt.kind.String(); got != string(tt.want) {
			t.Errorf("lockKind %d is named %q, want the library's %q", tt.kind, got, tt.want)
		}
		if k, ok := kindNamed(tt.want); !ok || k != tt.kind {
			t.Errorf("kindNamed(%q) = %d, %v, want %d, true", tt.want, k, ok, tt.kind)
		}
		if tt.kind != kindNone && !strings.Contains(tt.kind.flags(), " "+tt.kind.String()+" (") {
			t.Errorf("%q does not name the kind %q", tt.kind.flags(), tt.kind)
		}
	}
	if k, ok := kindNamed("spinlock"); ok || k != kindNone {
		t.Errorf(`kindNamed("spinlock") = %d, %v, want kindNone, false`, k, ok)
	}
}
