package etcdstore

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// queueOf builds contenders in queue order from compact descriptions: a
// letter, then for a read-write lock 'r' or 'w', for a semaphore the
// permits.
func queueOf(letter byte, sides string, permits ...int) []contender {
	n := max(len(sides), len(permits))
	cs := make([]contender, n)
	for i := range cs {
		cs[i] = contender{letter: letter, kv: &mvccpb.KeyValue{CreateRevision: int64(10 + i)}}
		cs[i].Holds = []uint64{1}
		if i < len(sides) && sides[i] == 'w' {
			cs[i].Writes = []uint64{1}
		}
		if i < len(permits) {
			cs[i].Permits = permits[i]
		}
	}
	return cs
}

func TestAdmitted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cs       []contender
		capacity int
		want     string // per contender: 'y' holds, 'n' waits
	}{
		{"fair", queueOf('f', "xxx"), 0, "ynn"},
		{"election", queueOf('e', "xx"), 0, "yn"},
		{"readers", queueOf('w', "rrr"), 0, "yyy"},
		{"writer first", queueOf('w', "wrr"), 0, "ynn"},
		{"readers then a writer then a reader", queueOf('w', "rrwr"), 0, "yynn"},
		{"two writers", queueOf('w', "ww"), 0, "yn"},
		{"semaphore fits", queueOf('s', "", 1, 2, 1), 4, "yyy"},
		{"semaphore in order", queueOf('s', "", 2, 3, 1), 4, "ynn"}, // the 1 does not pass the 3
		{"semaphore exact", queueOf('s', "", 2, 2, 1), 4, "yyn"},
	} {
		got := make([]byte, len(tc.cs))
		for i := range tc.cs {
			got[i] = 'n'
			if admitted(tc.cs, i, tc.capacity) {
				got[i] = 'y'
			}
		}
		if string(got) != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		if hs := holders(tc.cs); tc.cs[0].letter != 's' && len(hs) != countY(tc.want) {
			t.Errorf("%s: %d holders, want %d", tc.name, len(hs), countY(tc.want))
		}
	}
}

func countY(s string) (n int) {
	for _, c := range s {
		if c == 'y' {
			n++
		}
	}
	return n
}

// TestFitsNow: a new key holds at once only if it would be admitted at
// the back of the queue.
func TestFitsNow(t *testing.T) {
	reader, writer := holding{Holds: []uint64{1}}, holding{Holds: []uint64{1}, Writes: []uint64{1}}
	for _, tc := range []struct {
		name     string
		cs       []contender
		h        holding
		letter   byte
		capacity int
		want     bool
	}{
		{"reader beside readers", queueOf('w', "rr"), reader, 'w', 0, true},
		{"reader behind a waiting writer", queueOf('w', "rw"), reader, 'w', 0, false},
		{"writer beside readers", queueOf('w', "r"), writer, 'w', 0, false},
		{"fair behind a holder", queueOf('f', "x"), holding{}, 'f', 0, false},
		{"permits free", queueOf('s', "", 1, 1), holding{Permits: 2}, 's', 4, true},
		{"permits short", queueOf('s', "", 1, 2), holding{Permits: 2}, 's', 4, false},
		{"small behind a waiting big one", queueOf('s', "", 3, 2), holding{Permits: 1}, 's', 4, false},
	} {
		if got := fitsNow(tc.cs, tc.h, tc.letter, tc.capacity); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
