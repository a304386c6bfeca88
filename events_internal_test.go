package distlock

import (
	"testing"

	"github.com/distlock/distlock/internal/engine"
)

// Every event the engine reports, Acquired to Expired, has an EventKind of
// its own, with a name (an event the engine adds must be added here and
// to eventKinds: unmapped, it would reach handlers as "unknown").
func TestEveryEngineEventHasAKind(t *testing.T) {
	seen := map[EventKind]engine.EventKind{}
	for k := engine.Acquired; k <= engine.Expired; k++ {
		got := eventKindOf(k)
		if got.String() == "unknown" {
			t.Errorf("engine event %d has no EventKind", k)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("engine events %d and %d are both %v", other, k, got)
		}
		seen[got] = k
	}
}
