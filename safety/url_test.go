package safety

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// errNotOurs is what the test dialer answers for any address but the test
// server's: a fuzzed URL must never reach another service (the system
// Redis on 6379 included) or leave the machine.
var errNotOurs = errors.New("test dialer: connection refused (not the test server)")

// onlyDialer is go-redis's own dialer (redis.NewDialer: dial timeout, TLS
// when the URL asks for it) restricted to one address.
func onlyDialer(allowed string, opt *redis.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := redis.NewDialer(opt)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if network != "tcp" || addr != allowed {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errNotOurs}
		}
		return dial(ctx, network, addr)
	}
}

// tryURL parses u, and if it parses, locks and unlocks through it with a
// dialer that reaches only allowed. It returns the parse error, or the
// first error of the lock round trip, and whether Client.Close hung (see
// TestCloseBoundedOnTLSMismatch): then the go-redis client is closed
// under it to end the test.
func tryURL(u, allowed string) (parseErr, lockErr error, closeHung bool) {
	opt, err := redis.ParseURL(u)
	if err != nil {
		return err, nil, false
	}
	// Bounded whatever the URL says (a URL may turn timeouts off).
	bound := func(d time.Duration) time.Duration {
		if d <= 0 || d > time.Second {
			return time.Second
		}
		return d
	}
	opt.MaxRetries = -1
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = bound(opt.DialTimeout), bound(opt.ReadTimeout), bound(opt.WriteTimeout)
	opt.PoolTimeout = bound(opt.PoolTimeout)
	opt.Dialer = onlyDialer(allowed, opt)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	defer func() {
		done := make(chan struct{})
		go func() { c.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(6 * time.Second): // Close bounds releases to 5 s
			closeHung = true
			rdb.Close()
			<-done
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l, err := c.Mutex("url").TryLock(ctx)
	if err != nil {
		return nil, err, false
	}
	if _, err := c.Mutex("url").Inspect(ctx); err != nil {
		return nil, err, false
	}
	return nil, l.Unlock(ctx), false
}

// typedLockErr: the only acceptable failures of a lock round trip through a
// bad URL.
func typedLockErr(err error) bool {
	return err == nil || errors.Is(err, distlock.ErrBackend) || errors.Is(err, distlock.ErrNotAcquired) ||
		errors.Is(err, distlock.ErrUnsupported)
}

func TestRedisURLs(t *testing.T) {
	srv := redistest.Start(t, redistest.WithPassword("s3cret"))
	addr := srv.Addr()
	for _, tc := range []struct {
		url      string
		parseErr bool
		want     error  // nil: success
		contains string // in the error message
	}{
		{url: "redis://:s3cret@" + addr + "/0"},
		{url: "redis://default:s3cret@" + addr + "/0"},
		{url: "redis://:s3cret@" + addr + "/0?protocol=2"},
		{url: "redis://:s3cret@" + addr + "/0?protocol=3&client_name=locker&pool_size=1"},
		{url: "redis://:s3cret@" + addr + "/15?read_timeout=1s&write_timeout=1s&dial_timeout=1s"},
		{url: "redis://:s3cret@" + addr + "?max_retries=-1"},
		{url: "redis://:wrong@" + addr + "/0", want: distlock.ErrBackend, contains: "WRONGPASS"},
		{url: "redis://nobody:s3cret@" + addr + "/0", want: distlock.ErrBackend, contains: "WRONGPASS"},
		{url: "redis://" + addr + "/0", want: distlock.ErrBackend, contains: "NOAUTH"},
		{url: "redis://:s3cret@" + addr + "/99", want: distlock.ErrBackend, contains: "DB index is out of range"},
		{url: "redis://:s3cret@127.0.0.1:1/0", want: distlock.ErrBackend, contains: "refused"},
		// TLS to a plain port: the handshake never completes; the context
		// ends first.
		{url: "rediss://:s3cret@" + addr + "/0", want: distlock.ErrNotAcquired, contains: "deadline"},
		{url: "unix:///nonexistent/redis.sock", want: distlock.ErrBackend},
		{url: "", parseErr: true},
		{url: "http://" + addr, parseErr: true},
		{url: "redis://" + addr + "/notanumber", parseErr: true},
		{url: "redis://" + addr + "/0?pool_size=x", parseErr: true},
		{url: "redis://" + addr + "/0?unknown_option=1", parseErr: true},
		{url: "redis://[::1", parseErr: true},
		{url: "redis://" + addr + "/0/1", parseErr: true},
	} {
		t.Run(tc.url, func(t *testing.T) {
			perr, err, hung := tryURL(tc.url, addr)
			if hung {
				t.Errorf("Client.Close hung (see TestCloseBoundedOnTLSMismatch)")
			}
			if tc.parseErr {
				if perr == nil {
					t.Fatalf("ParseURL accepted it (lock: %v)", err)
				}
				return
			}
			if perr != nil {
				t.Fatalf("ParseURL: %v", perr)
			}
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("lock round trip: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("lock round trip: %v, want %v", err, tc.want)
			case tc.want == distlock.ErrBackend && errors.Is(err, distlock.ErrNotAcquired):
				t.Fatalf("a backend failure reads as contention: %v", err)
			case !strings.Contains(fmt.Sprint(err), tc.contains):
				t.Fatalf("error %q does not mention %q", err, tc.contains)
			}
		})
	}
}

// Whatever the URL, ParseURL plus distlock never panics and fails only with
// a typed error.
func FuzzRedisURL(f *testing.F) {
	srv := redistest.Start(f)
	addr := srv.Addr()
	for _, s := range []string{
		"redis://" + addr + "/0", "redis://:pw@" + addr + "/1", "redis://" + addr + "/0?protocol=2",
		"redis://u:p@" + addr + "/0?pool_size=1&pool_timeout=1ms", "redis://" + addr + "/0?read_timeout=-1",
		"redis://" + addr + "/0?read_timeout=-2", "redis://" + addr + "/0?min_idle_conns=-5", "unix://:pw@/tmp/x?db=3",
		"redis://%zz@" + addr, "redis://" + addr + ":99999", "redis://:@:0", "redis://" + addr + "/0?conn_max_lifetime=1ns",
		"redis://" + addr + "/0?max_retries=100&min_retry_backoff=1ns",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		if strings.Contains(u, "dial_timeout") {
			// A dial timeout is not reported as ErrBackend: see
			// TestDialTimeoutIsErrBackend.
			t.Skip()
		}
		_, err, _ := tryURL(u, addr)
		if !typedLockErr(err) {
			t.Fatalf("URL %q: untyped error %v", u, err)
		}
	})
}

// A rediss:// URL pointed at a plain-TCP Redis (a common misconfiguration)
// with stock go-redis options: Lock ends with its context, and Client.Close
// returns within its bound although the acquisition it left behind is still
// dialling (it blocked for over 40 s before the fix). Found by this suite
// (bug 4).
func TestCloseBoundedOnTLSMismatch(t *testing.T) {
	srv := redistest.Start(t)
	opt, err := redis.ParseURL("rediss://" + srv.Addr() + "/0")
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err = c.Mutex("x").TryLock(ctx)
	cancel()
	if !errors.Is(err, distlock.ErrNotAcquired) && !errors.Is(err, distlock.ErrBackend) {
		t.Errorf("TryLock: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Errorf("Client.Close still blocked after 15 s")
		rdb.Close()
		<-done
	}
}
