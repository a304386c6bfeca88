package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// proxyDialTimeout bounds how long a Proxy waits to connect to its target.
const proxyDialTimeout = 5 * time.Second

// A Proxy is a TCP proxy on a free port of 127.0.0.1 that forwards each
// connection it accepts to a target address. It is the fault-injection
// point between clients and an etcd member: [Proxy.Pause] freezes it,
// [Proxy.Resume] releases it and [Proxy.Cut] drops its connections.
//
// Each accepted connection gets its own connection to the target, made when
// it is accepted; if that fails (the member is down), the accepted
// connection is closed at once, as a refused connection would be.
//
// A Proxy is safe for concurrent use by multiple goroutines.
type Proxy struct {
	ln     net.Listener
	target string
	ctx    context.Context // canceled by Close: ends dials under way
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	mu      sync.Mutex
	flowing chan struct{} // closed while forwarding; open while paused
	links   map[*link]struct{}
	closed  bool
}

// A link is one proxied connection: the accepted one and the one to the
// target.
type link struct {
	client, server net.Conn
	done           chan struct{} // closed by close
	once           sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// NewProxy starts a proxy to target, a "host:port" address, listening on a
// free port of 127.0.0.1. The target need not be up yet. The caller must
// call [Proxy.Close].
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: proxy listen: %w", err)
	}
	p := &Proxy{
		ln:      ln,
		target:  target,
		flowing: make(chan struct{}),
		links:   make(map[*link]struct{}),
	}
	close(p.flowing)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address, "127.0.0.1:PORT". It does not change
// for the proxy's lifetime.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Pause stops forwarding data in both directions, as if the server had
// frozen: connections stay open and new ones are still accepted, but bytes
// sent either way are held until [Proxy.Resume], so requests time out.
// Pausing a paused proxy does nothing.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	select {
	case <-p.flowing:
		p.flowing = make(chan struct{})
	default: // paused already
	}
}

// Resume undoes [Proxy.Pause]: the data held meanwhile is delivered, in
// order, and forwarding goes on. Resuming a proxy that is not paused does
// nothing.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
	default:
		close(p.flowing)
	}
}

// Paused reports whether the proxy is paused.
func (p *Proxy) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
		return false
	default:
		return true
	}
}

// Cut closes every connection the proxy has open, on both sides, and
// drops any data held by [Proxy.Pause] for them: clients see their
// connections reset, as when a server crashes. The proxy goes on accepting
// new connections, in its current paused or resumed state.
func (p *Proxy) Cut() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
		delete(p.links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Conns returns how many connections the proxy is forwarding: 0 right
// after [Proxy.Cut], until new ones are accepted.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops the proxy: it stops listening, closes every connection and
// returns once all its goroutines have ended. Close is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.cancel()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c to the target and forwards between them until either
// side is done.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: proxyDialTimeout}
	s, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	l := &link{client: c, server: s, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()

	var dirs sync.WaitGroup
	dirs.Add(2)
	go func() { defer dirs.Done(); p.pipe(l, s, c) }()
	p.pipe(l, c, s)
	dirs.Done()
	dirs.Wait()
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// pipe copies from src to dst, waiting while the proxy is paused before
// each write. At the end of src it half-closes dst, so the other direction
// can finish; on any other error it closes the whole link.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.await(l) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				l.close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
					return
				}
			}
			l.close()
			return
		}
	}
}

// await waits until the proxy is not paused; it returns false if the link
// was closed meanwhile.
func (p *Proxy) await(l *link) bool {
	p.mu.Lock()
	flowing := p.flowing
	p.mu.Unlock()
	select {
	case <-flowing:
		select {
		case <-l.done:
			return false
		default:
			return true
		}
	case <-l.done:
		return false
	}
}
