package etcdstore

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestHoldingJSON: a holding's value is what json.Marshal makes of it,
// byte for byte, whatever its strings hold (escapes, HTML characters,
// other scripts, invalid UTF-8) and whichever fields are empty.
func TestHoldingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		h := randomHolding(rng)
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.appendJSON(nil); string(got) != string(want) {
			t.Fatalf("%#v:\n got %s\nwant %s", h, got, want)
		}
	}
}
