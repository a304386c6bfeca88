package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// tlsHandshakeTimeout bounds the TLS handshake that a rediss:// URL's
// first server is checked with: a plain-text Redis never answers a TLS
// client hello, and go-redis would retry the handshake until pingTimeout.
const tlsHandshakeTimeout = 3 * time.Second

// A tlsTarget is a server that a rediss:// URL says speaks TLS.
// A nil *tlsTarget is no such server.
type tlsTarget struct {
	addr   string
	config *tls.Config
}

// newTLSTarget returns the first of addrs as a TLS target if config,
// the TLS configuration of the URL, is set (rediss://), else nil.
func newTLSTarget(addrs []string, config *tls.Config) *tlsTarget {
	if config == nil || len(addrs) == 0 {
		return nil
	}
	return &tlsTarget{addr: addrs[0], config: config}
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
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no TLS handshake within %v: does the server serve TLS on this port? (rediss:// asks for TLS; use redis:// for a plain-text port)", tlsHandshakeTimeout)
	}
	var rerr tls.RecordHeaderError
	if errors.As(err, &rerr) {
		return errors.New("the server did not answer in TLS: it serves plain text on this port (rediss:// asks for TLS; use redis:// for a plain-text port)")
	}
	return fmt.Errorf("TLS handshake failed: %v", err)
}
