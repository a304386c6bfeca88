package safety

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/bits"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ownerRandom is the random part of an owner id ("<hex>:<sequence>").
func ownerRandom(owner string) string { r, _, _ := strings.Cut(owner, ":"); return r }

// Owner ids (the secret that lets a holder renew and release, in the lock
// hash field "owner") never reach the log, events, errors or the lease's
// String, through a run with acquisitions, re-entry, waiting, renewals,
// renewal failures (Redis killed) and losses (takeover, Redis down).
func TestOwnerIDsNeverLogged(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ev := newEventWaiter()
	var mu sync.Mutex
	var texts []string // every event error, returned error and String seen
	keep := func(s string) { mu.Lock(); texts = append(texts, s); mu.Unlock() }
	opt := srv.Options()
	opt.MaxRetries = -1
	rdb := srvClient(t, opt)
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(logger), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Err != nil {
			keep(e.Err.Error())
		}
		keep(fmt.Sprintf("%+v", e))
		ev.handle(e)
	}))
	defer c.Close()
	ctx := testCtx(t)
	var owners []string
	owner := func(name string) {
		o, err := admin.HGet(ctx, "distlock:{"+name+"}", "owner").Result()
		if err != nil || o == "" {
			t.Fatalf("owner of %s: %q, %v", name, o, err)
		}
		owners = append(owners, o)
	}
	errText := func(err error) {
		if err != nil {
			keep(err.Error())
			keep(fmt.Sprintf("%+v", err))
		}
	}

	// Acquire, re-enter, wait, release.
	l, err := c.Mutex("secret", distlock.WithTTL(200*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner("secret")
	keep(l.String())
	keep(fmt.Sprintf("%v %+v %#v", l, l, l))
	in, err := c.Mutex("secret").Lock(l.Context())
	errText(err)
	errText(in.Unlock(ctx))
	got := make(chan error, 1)
	go func() {
		w, err := c.Mutex("secret").Lock(ctx)
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	<-ev.ch[distlock.EventWaiting]
	<-ev.ch[distlock.EventRenewed]
	info, err := c.Mutex("secret").Inspect(ctx)
	errText(err)
	keep(fmt.Sprintf("%+v", info))
	errText(l.Unlock(ctx))
	errText(<-got)
	errText(l.Unlock(ctx)) // ErrNotHeld

	// Loss by takeover.
	l2, err := c.Mutex("taken", distlock.WithTTL(200*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner("taken")
	admin.HSet(ctx, "distlock:{taken}", "owner", "intruder")
	<-l2.Context().Done()
	errText(context.Cause(l2.Context()))
	errText(l2.Unlock(ctx))

	// Renewal failures and loss with Redis down.
	l3, err := c.Mutex("down", distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner("down")
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	// A renewal failure is logged if a failed renewal returns before the
	// hold's deadline; whether it does depends on timing, the loss does not.
	select {
	case <-ev.ch[distlock.EventRenewFailed]:
	case <-l3.Context().Done():
	}
	<-l3.Context().Done()
	errText(context.Cause(l3.Context()))
	errText(l3.Unlock(ctx))
	errText(l3.Extend(ctx, time.Second))
	_, err = c.Mutex("down").TryLock(ctx)
	errText(err)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}

	all := logs.String() + strings.Join(texts, "\n")
	if !strings.Contains(logs.String(), `"event":"renew-failed"`) {
		t.Log("no renewal failure in this run: the loss came first")
	}
	for _, want := range []string{`"event":"renewed"`, `"event":"lost"`, `"event":"waiting"`, `"event":"released"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log has no %s: the run did not cover it", want)
		}
	}
	for _, o := range owners {
		for _, secret := range []string{o, ownerRandom(o)} {
			if strings.Contains(all, secret) {
				t.Errorf("owner secret %q appears in the log, events or errors", secret)
			}
		}
	}
	t.Logf("%d log bytes, %d texts checked against %d owner ids", len(logs.String()), len(texts), len(owners))
}

// Owner ids carry at least 128 random bits: 64 clients' ids have 32 hex
// digits of randomness each, all distinct, with balanced bits; every
// acquisition has its own id.
func TestOwnerIDEntropy(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := testCtx(t)
	seen := map[string]bool{}
	randoms := map[string]bool{}
	ones, total := 0, 0
	for i := 0; i < 64; i++ {
		c := distlock.New(redisstore.New(admin), distlock.WithLogger(nil))
		for j := 0; j < 2; j++ {
			name := fmt.Sprintf("entropy-%d-%d", i, j)
			l, err := c.Mutex(name).TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			o := admin.HGet(ctx, "distlock:{"+name+"}", "owner").Val()
			if seen[o] {
				t.Fatalf("owner id %q used twice", o)
			}
			seen[o] = true
			r := ownerRandom(o)
			b, err := hex.DecodeString(r)
			if err != nil || len(b) < 16 {
				t.Fatalf("owner id %q: random part %q is not >= 128 bits of hex", o, r)
			}
			if j == 0 {
				if randoms[r] {
					t.Fatalf("two clients share the random part %q", r)
				}
				randoms[r] = true
				for _, x := range b {
					ones += bits.OnesCount8(x)
				}
				total += 8 * len(b)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	// 8192 fair bits: mean 4096, standard deviation 45; allow 6 of them.
	if d := ones - total/2; d < -270 || d > 270 {
		t.Fatalf("%d ones in %d random bits: not uniform", ones, total)
	}
}
