package redisbackend

import (
	"slices"
	"testing"
)

func TestPlainKeys(t *testing.T) {
	k := Keys{Prefix: "p:"}
	got := k.plain("a.b", "o1")
	want := []string{k.Lock("a.b"), k.Fence("a.b"), k.Queue("a.b"), k.Abandoned("a.b", "o1")}
	if !slices.Equal(got[:], want) {
		t.Fatalf("plain keys = %q, want %q", got, want)
	}
}
