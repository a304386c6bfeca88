package main

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// A proxy forwards TCP connections on a loopback port to a server until
// it is cut: from then on it forwards nothing either way, and keeps the
// connections open, as a network partition does.
type proxy struct {
	ln  net.Listener
	cut atomic.Bool
	wg  sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

// startProxy starts a proxy to the server at target, stopped when the
// test ends.
func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, conns: []net.Conn{}}
	p.wg.Go(func() { p.accept(target) })
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Cut stops all forwarding, for good.
func (p *proxy) Cut() { p.cut.Store(true) }

func (p *proxy) accept(target string) {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		var server net.Conn
		if !p.cut.Load() {
			server, err = net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Go(func() { p.pipe(server, client) })
		if server != nil {
			p.wg.Go(func() { p.pipe(client, server) })
		}
	}
}

// track records the connections so that close closes them; it reports
// false, having closed them, if the proxy is closed already.
func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		if c == nil {
			continue
		}
		if p.conns == nil {
			c.Close()
			continue
		}
		p.conns = append(p.conns, c)
	}
	return p.conns != nil
}

// pipe copies from src to dst until src fails, dropping what it reads
// once the proxy is cut (or when there is no dst).
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && !p.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if dst != nil {
				dst.Close()
			}
			return
		}
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
