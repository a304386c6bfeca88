package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
)

// tlsHandshakeTimeout bounds the TLS handshake that a rediss:// or
// etcds:// URL's first server is checked with: a plain-text server never
// answers a TLS client hello, and the store's client would retry the
// handshake until pingTimeout.
const tlsHandshakeTimeout = 3 * time.Second

// A tlsTarget is a server that a rediss:// or etcds:// URL says speaks
// TLS. A nil *tlsTarget is no such server.
type tlsTarget struct {
	addr   string
	config *tls.Config
	scheme string // of the URL: "rediss" or "etcds"
}

// newTLSTarget returns the first of addrs as a TLS target if config,
// the TLS configuration of the URL, is set (scheme rediss or etcds),
// else nil. A config without a ServerName checks the server's
// certificate against the address's host, as the store's client does.
func newTLSTarget(addrs []string, config *tls.Config, scheme string) *tlsTarget {
	if config == nil || len(addrs) == 0 {
		return nil
	}
	if config.ServerName == "" {
		if host, _, err := net.SplitHostPort(addrs[0]); err == nil {
			config = config.Clone()
			config.ServerName = host
		}
	}
	return &tlsTarget{addr: addrs[0], config: config, scheme: scheme}
}

// check connects to the server and shakes hands in TLS with it, within
// tlsHandshakeTimeout. It returns an error that names TLS if the server
// does not complete the handshake, and nil otherwise, also when it cannot
// connect at all: that the Redis client reports in its own words.
func (t *tlsTarget) check(ctx context.Context) error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil
	}
	defer conn.Close()
	err = tls.Client(conn, t.config).HandshakeContext(ctx)
	hint := fmt.Sprintf("(%s:// asks for TLS; use %s:// for a plain-text port)", t.scheme, strings.TrimSuffix(t.scheme, "s"))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no TLS handshake within %v: does the server serve TLS on this port? %s", tlsHandshakeTimeout, hint)
	}
	var rerr tls.RecordHeaderError
	if errors.As(err, &rerr) {
		return fmt.Errorf("the server did not answer in TLS: it serves plain text on this port %s", hint)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		// etcd's plain-text port hangs up on a TLS client hello.
		return fmt.Errorf("the server hung up on the TLS handshake: does it serve TLS on this port? %s", hint)
	}
	return fmt.Errorf("TLS handshake failed: %v", err)
}
