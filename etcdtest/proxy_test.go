package etcdtest_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/etcdtest"
)

// echoServer listens on a free loopback port and echoes every line back
// until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c); _ = c.Close() })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T, target string) *etcdtest.Proxy {
	t.Helper()
	p, err := etcdtest.NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close proxy: %v", err)
		}
	})
	return p
}

type lineConn struct {
	net.Conn
	r *bufio.Reader
}

func dialLine(t *testing.T, addr string) *lineConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &lineConn{Conn: c, r: bufio.NewReader(c)}
}

// roundTrip sends line and reads the echo, waiting at most d.
func (c *lineConn) roundTrip(line string, d time.Duration) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return c.read(d)
}

func (c *lineConn) read(d time.Duration) (string, error) {
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return "", err
	}
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return s[:len(s)-1], nil
}

func TestProxyForwards(t *testing.T) {
	target := echoServer(t)
	p := newProxy(t, target)
	if p.Target() != target {
		t.Errorf("Target() = %q, want %q", p.Target(), target)
	}
	if p.Addr() == target {
		t.Fatalf("Addr() = target %q", target)
	}
	c := dialLine(t, p.Addr())
	if got, err := c.roundTrip("hello", 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("echo through proxy = %q, %v; want hello", got, err)
	}
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns() = %d, want 1", n)
	}
}

func TestProxyPauseResume(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dialLine(t, p.Addr())
	if _, err := c.roundTrip("before", 5*time.Second); err != nil {
		t.Fatal(err)
	}

	p.Pause()
	p.Pause() // idempotent
	if !p.Paused() {
		t.Fatal("Paused() = false after Pause")
	}
	// A frozen server: the write is accepted, no reply comes.
	if got, err := c.roundTrip("during", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("echo while paused = %q, %v; want a timeout", got, err)
	}
	// A connection made while paused is accepted but gets nothing either.
	c2 := dialLine(t, p.Addr())
	if got, err := c2.roundTrip("new", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("echo on a new connection while paused = %q, %v; want a timeout", got, err)
	}

	p.Resume()
	p.Resume() // idempotent
	if p.Paused() {
		t.Fatal("Paused() = true after Resume")
	}
	// What was held is delivered, in order, on the same connections.
	if got, err := c.read(5 * time.Second); err != nil || got != "during" {
		t.Fatalf("held echo after Resume = %q, %v; want during", got, err)
	}
	if got, err := c2.read(5 * time.Second); err != nil || got != "new" {
		t.Fatalf("held echo on the new connection = %q, %v; want new", got, err)
	}
	if got, err := c.roundTrip("after", 5*time.Second); err != nil || got != "after" {
		t.Fatalf("echo after Resume = %q, %v; want after", got, err)
	}
}

func TestProxyCut(t *testing.T) {
	p := newProxy(t, echoServer(t))
	c := dialLine(t, p.Addr())
	if _, err := c.roundTrip("before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Pause()
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if n := p.Conns(); n != 0 {
		t.Errorf("Conns() after Cut = %d, want 0", n)
	}
	// The connection is closed: the read ends with an error at once, not a
	// timeout, and the held line is dropped.
	got, err := c.read(5 * time.Second)
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Cut = %q, %v; want a closed connection", got, err)
	}
	// Cut keeps the paused state and goes on accepting.
	if !p.Paused() {
		t.Error("Paused() = false after Cut of a paused proxy")
	}
	p.Resume()
	c2 := dialLine(t, p.Addr())
	if got, err := c2.roundTrip("again", 5*time.Second); err != nil || got != "again" {
		t.Fatalf("echo on a new connection after Cut = %q, %v; want again", got, err)
	}
}

func TestProxyTargetDown(t *testing.T) {
	// A port that was free a moment ago: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	_ = ln.Close()
	p := newProxy(t, target)
	c := dialLine(t, p.Addr())
	got, err := c.read(5 * time.Second)
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a proxy to a dead target = %q, %v; want the connection closed", got, err)
	}
}

func TestProxyClose(t *testing.T) {
	p, err := etcdtest.NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dialLine(t, p.Addr())
	if _, err := c.roundTrip("x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Pause() // Close must not wait for a paused connection
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.read(5 * time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Close: %v; want the connection closed", err)
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		_ = c.Close()
		t.Fatal("proxy still accepts after Close")
	}
}
