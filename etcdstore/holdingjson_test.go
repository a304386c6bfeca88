package etcdstore

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randomHolding is a holding whose strings hold anything (escapes, HTML
// characters, other scripts, invalid UTF-8) and whose fields may be empty.
func randomHolding(rng *rand.Rand) holding {
	strs := []string{"", "o-1f3a", "host.example", "with \"quotes\"", `back\slash`, "<a>", "a>b", "a&b", "tab\there",
		"\x00\x1f", "é ü 中文", "\u2028\u2029", "\xff\xfe", "del\x7f", "🙂"}
	uints := [][]uint64{nil, {}, {1}, {1, 18446744073709551615, 42}}
	return holding{
		Owner: strs[rng.IntN(len(strs))], Holds: uints[rng.IntN(len(uints))], Writes: uints[rng.IntN(len(uints))],
		Seq: rng.Uint64() >> rng.IntN(64), Permits: rng.IntN(3) - 1, Capacity: rng.IntN(5),
		Value: strs[rng.IntN(len(strs))], Revoked: rng.IntN(2) == 0, Host: strs[rng.IntN(len(strs))],
		PID: rng.IntN(1 << 22), Since: rng.Int64() - rng.Int64(),
	}
}

// TestDecodeHolding: whatever a holding holds, decodeHolding reads back
// from its value what json.Unmarshal reads; and a value as the store
// writes it for its own owners (ASCII names) is read without
// json.Unmarshal.
func TestDecodeHolding(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	scanned := 0
	for range 5000 {
		b := randomHolding(rng).appendJSON(nil)
		var got, want holding
		errGot, errWant := decodeHolding(b, &got), json.Unmarshal(b, &want)
		if (errGot == nil) != (errWant == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %#v, %v\nwant %#v, %v", b, got, errGot, want, errWant)
		}
		var h holding
		if scanHolding(b, &h) {
			scanned++
		}
	}
	if scanned < 50 { // about 2 % have no string that needs json.Unmarshal
		t.Errorf("only %d values of 5000 read by hand: the round trip does not exercise it", scanned)
	}
	own := holding{Owner: "9f86d081884c7d659a2feaa0c55ad015", Holds: []uint64{1}, Seq: 3, Host: "node-1.example", PID: 4242, Since: 1764345600000}
	for _, h := range []holding{own, {Owner: "o", Holds: []uint64{1, 2}, Writes: []uint64{2}, Permits: 2, Capacity: 5,
		Value: "candidate", Revoked: true, Host: "h", PID: -1, Since: -1}} {
		var got holding
		if !scanHolding(h.appendJSON(nil), &got) || !reflect.DeepEqual(got, h) {
			t.Errorf("%s: scanned %#v, want %#v", h.appendJSON(nil), got, h)
		}
	}
}

// FuzzDecodeHolding: on any bytes, decodeHolding agrees with
// json.Unmarshal, on the holding and on whether it is one.
func FuzzDecodeHolding(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		f.Add(randomHolding(rng).appendJSON(nil))
	}
	for _, s := range []string{`{"owner":"a","holds":[01],"seq":0,"host":"","pid":0,"since":0}`,
		`{"owner":"a","holds":[18446744073709551616],"seq":0,"host":"","pid":0,"since":0}`,
		`{"owner":"a","holds":[],"seq":0,"host":"","pid":-9223372036854775808,"since":-9223372036854775809}`,
		`{"owner":"a","holds":null,"seq":0,"permits":-0,"revoked":false,"host":"","pid":0,"since":0}`,
		`{"owner":"a","holds":[1,],"seq":0,"host":"","pid":0,"since":0}`, `{"owner":"a"} `, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want holding
		errGot, errWant := decodeHolding(b, &got), json.Unmarshal(b, &want)
		if (errGot == nil) != (errWant == nil) {
			t.Fatalf("%q: error %v, json.Unmarshal's %v", b, errGot, errWant)
		}
		if errGot == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", b, got, want)
		}
	})
}
