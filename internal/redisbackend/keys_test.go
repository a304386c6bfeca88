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

func TestScriptKeys(t *testing.T) {
	k := Keys{Prefix: "p:"}
	got := k.script("a.b", "o1")
	want := []string{k.Lock("a.b"), k.Fence("a.b"), k.Queue("a.b"), k.QueueDeadlines("a.b"), k.QueueInfo("a.b"),
		k.Holders("a.b"), k.Abandoned("a.b", "o1"), k.Capacity("a.b")}
	if !slices.Equal(got[:], want) {
		t.Fatalf("script keys = %q, want %q", got, want)
	}
}
