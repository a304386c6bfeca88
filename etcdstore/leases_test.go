package etcdstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestFreshLeaseNeedsNoKeepAlive: a request whose lease had a keep-alive
// answered recently enough needs none of its own, and costs no goroutine
// and no allocation to learn it; a request on a lease that has been
// replaced since is told so, however fresh the new one is.
func TestFreshLeaseNeedsNoKeepAlive(t *testing.T) {
	s := New(nil)
	ctx := context.Background()
	c := &classLease{ttl: 31, id: 7, kept: time.Now()}
	allocs := testing.AllocsPerRun(100, func() {
		if err := <-s.keepAliveAsync(ctx, c, 7, time.Now()); err != nil {
			t.Fatalf("fresh lease: %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("a fresh lease's keep-alive check allocates %v times, want 0 (no goroutine, no channel)", allocs)
	}
	if err := <-s.keepAliveAsync(ctx, c, 6, time.Now()); !errors.Is(err, errLeaseExpired) {
		t.Errorf("a request on a replaced lease: %v, want errLeaseExpired", err)
	}
}
