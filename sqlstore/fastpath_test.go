package sqlstore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/distlock/distlock/store"
)

// TestFreeTakeIsTake: the state the fast path writes is, byte for byte,
// what the general path's take of a free mutex encodes (so the row reads
// the same whichever path took it, and the next step writes nothing it
// need not).
func TestFreeTakeIsTake(t *testing.T) {
	for _, tc := range []struct {
		r    store.Request
		host string
		pid  int
	}{
		{store.Request{Name: "n", Owner: "0123abcd", Hold: 1, Seq: 1, Lease: 30 * time.Second}, "vm", 4242},
		{store.Request{Name: "n", Owner: `we"ird<&>`, Hold: 0, Seq: 7, Lease: 1500 * time.Millisecond}, "", 0},
		{store.Request{Name: "n", Owner: "o", Hold: 9, Seq: 0, Lease: time.Hour}, "host \"q\" <x>", 1},
	} {
		var token uint64 = 41
		now := int64(1_795_800_000_123_456)
		var l lockState
		st := &step{name: "n", now: now, token: &token}
		g, err := l.acquire(st, tc.r, tc.host, tc.pid)
		if err != nil || !g.Acquired {
			t.Fatalf("general take: %+v, %v", g, err)
		}
		want, _ := json.Marshal(&l)
		got := newFreeTake(tc.r, tc.host, tc.pid).state(token, now+micros(tc.r.Lease), now/1000)
		if got != string(want) {
			t.Errorf("fast path state\n%s\ngeneral path state\n%s", got, want)
		}
	}
}
