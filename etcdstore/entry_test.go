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
	strs := []string{"", "o-1f3a", "host.example", "with \"quotes\"", `back\slash`, "<a>", "a>b", "a&b", "tab\there",
		"\x00\x1f", "é ü 中文", "\u2028\u2029", "\xff\xfe", "del\x7f", "🙂"}
	uints := [][]uint64{nil, {}, {1}, {1, 18446744073709551615, 42}}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		h := holding{
			Owner: strs[rng.IntN(len(strs))], Holds: uints[rng.IntN(len(uints))], Writes: uints[rng.IntN(len(uints))],
			Seq: rng.Uint64() >> rng.IntN(64), Permits: rng.IntN(3) - 1, Capacity: rng.IntN(5),
			Value: strs[rng.IntN(len(strs))], Revoked: rng.IntN(2) == 0, Host: strs[rng.IntN(len(strs))],
			PID: rng.IntN(1 << 22), Since: rng.Int64() - rng.Int64(),
		}
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.appendJSON(nil); string(got) != string(want) {
			t.Fatalf("%#v:\n got %s\nwant %s", h, got, want)
		}
	}
}
