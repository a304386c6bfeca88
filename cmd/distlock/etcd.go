package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdstore"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The schemes of etcd URLs, and the port of an address without one.
const (
	etcdScheme      = "etcd"
	etcdTLSScheme   = "etcds"
	defaultEtcdPort = "2379"
)

// An etcdTarget is what an etcd:// or etcds:// URL says.
type etcdTarget struct {
	addrs          []string // HOST:PORT of each member given
	tls            bool     // etcds://
	user, password string   // both or neither
	prefix         string   // the prefix parameter, if hasPrefix
	hasPrefix      bool
}

// parseEtcdURL parses an etcd URL,
// etcd[s]://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/][?prefix=P],
// from from ("--store", "$DISTLOCK_STORE"). A malformed URL is a usage
// error that names where it comes from and never repeats the URL, which
// may hold a password.
func parseEtcdURL(s, from string) (etcdTarget, error) {
	scheme, rest, _ := strings.Cut(s, "://")
	t := etcdTarget{tls: strings.EqualFold(scheme, etcdTLSScheme)}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	hosts := authority
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		// The user information alone, before a host that url.Parse
		// accepts: it decodes the escapes (%40 for an @ in a password).
		u, err := url.Parse("etcd://" + authority[:at] + "@host")
		if err != nil {
			return etcdTarget{}, badEtcdURL(from, err)
		}
		t.user = u.User.Username()
		t.password, _ = u.User.Password()
		if t.user == "" || t.password == "" {
			return etcdTarget{}, usageErrorf("invalid etcd URL in %s: the user information must be USER:PASSWORD, both not empty (%s)", from, etcdURLForm)
		}
		hosts = authority[at+1:]
	}
	for _, addr := range strings.Split(hosts, ",") {
		if addr == "" {
			return etcdTarget{}, usageErrorf("invalid etcd URL in %s: missing host (%s)", from, etcdURLForm)
		}
		if err := checkAddr(addr); err != nil {
			return etcdTarget{}, badEtcdURL(from, err)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil { // no port
			addr = net.JoinHostPort(strings.Trim(addr, "[]"), defaultEtcdPort)
		}
		t.addrs = append(t.addrs, addr)
	}
	u, err := url.Parse("etcd://host" + tail)
	if err != nil {
		return etcdTarget{}, badEtcdURL(from, err)
	}
	switch {
	case u.Path != "" && u.Path != "/":
		return etcdTarget{}, usageErrorf("invalid etcd URL in %s: unexpected path %q: the key prefix goes in ?prefix= (%s)", from, u.Path, etcdURLForm)
	case u.Fragment != "":
		return etcdTarget{}, usageErrorf("invalid etcd URL in %s: unexpected fragment #%s (%s)", from, u.Fragment, etcdURLForm)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return etcdTarget{}, badEtcdURL(from, err)
	}
	for k, v := range q {
		switch {
		case k != "prefix":
			return etcdTarget{}, usageErrorf("invalid etcd URL in %s: unknown parameter %q (the only one is prefix)", from, k)
		case len(v) != 1 || v[0] == "":
			return etcdTarget{}, usageErrorf("invalid etcd URL in %s: give prefix once, not empty", from)
		}
		t.prefix, t.hasPrefix = v[0], true
	}
	return t, nil
}

// etcdURLForm is the form of an etcd URL, for messages.
const etcdURLForm = "want etcd://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/?prefix=PREFIX], or etcds:// for TLS"

// badEtcdURL is the usage error of an etcd URL from from that is
// malformed, without the URL itself.
func badEtcdURL(from string, err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return usageErrorf("invalid etcd URL in %s: %v (%s)", from, err, etcdURLForm)
}

// newEtcdSession returns a session on the etcd cluster that the URL u
// names. It does not contact etcd, unless the URL has a user and a
// password: etcd's client logs in as it is made, so the session then
// first checks that a member listens (at once, rather than after
// pingTimeout), and logs in within pingTimeout.
func newEtcdSession(rf *storeFlags, u storeURL, opts []distlock.Option) (*session, error) {
	t, err := parseEtcdURL(u.url, u.from)
	if err != nil {
		return nil, err
	}
	prefix := etcdstore.DefaultPrefix
	switch {
	case rf.prefixSet && t.hasPrefix && rf.prefix != t.prefix:
		return nil, usageErrorf("--prefix %q and the prefix parameter of the etcd URL in %s, %q, differ: give the prefix once", rf.prefix, u.from, t.prefix)
	case rf.prefixSet:
		prefix = rf.prefix
	case t.hasPrefix:
		prefix = t.prefix
	}
	cfg := clientv3.Config{
		DialTimeout: pingTimeout, // bounds the log-in of a user
		Logger:      zap.NewNop(),
		Username:    t.user,
		Password:    t.password,
	}
	scheme := "http://"
	if t.tls {
		scheme = "https://"
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if err := rf.tls.apply(cfg.TLS); err != nil {
			return nil, err
		}
	} else if rf.tls.set() {
		return nil, rf.tls.errNotTLS(u.from)
	}
	for _, addr := range t.addrs {
		cfg.Endpoints = append(cfg.Endpoints, scheme+addr)
	}
	s := &session{addr: strings.Join(t.addrs, ","), prefix: prefix, endpoints: t.addrs, tls: newTLSTarget(t.addrs, cfg.TLS, etcdTLSScheme)}
	// A member that answers no request, but for a lost majority, is one
	// whose TLS the URL does not match: etcd's client retries those
	// connections until its request's context ends.
	switch {
	case !t.tls:
		s.silent = "is a majority of its members up, serving plain text? use etcds:// for TLS"
	case rf.tls.cert == "":
		s.silent = "is a majority of its members up? does it ask for a client certificate (--tls-cert, --tls-key)?"
	default:
		s.silent = "is a majority of its members up, and do they accept the client certificate?"
	}
	if t.user != "" {
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		defer cancel()
		if err := s.reachable(ctx); err != nil {
			return nil, err
		}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, s.etcdFailure(err)
	}
	s.etcd = cli
	s.client = distlock.New(etcdstore.New(cli, etcdstore.WithPrefix(prefix)), opts...)
	return s, nil
}

// reachable checks that a member of the session's etcd cluster listens,
// and speaks TLS if the URL says so. Unlike a request, which etcd's
// client retries until its context ends, it fails at once if nothing
// listens at any of the addresses.
func (s *session) reachable(ctx context.Context) error {
	if err := s.tls.check(ctx); err != nil {
		return exitf(exitUnavailable, "cannot reach etcd at %s: %v", s.addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
	defer cancel()
	errs := make([]error, len(s.endpoints))
	var wg sync.WaitGroup
	for i, addr := range s.endpoints {
		wg.Go(func() {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				_ = conn.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			return nil
		}
	}
	return exitf(exitUnavailable, "cannot reach etcd at %s: %v", s.addr, rootCause(errs[0]))
}

// pingEtcd checks that the etcd cluster answers a linearizable read of a
// key under the session's prefix, which also checks that it accepts the
// session's user, if any, and lets it read there.
func (s *session) pingEtcd(ctx context.Context) error {
	if err := s.reachable(ctx); err != nil {
		return err
	}
	_, err := s.etcd.Get(ctx, s.prefix, clientv3.WithCountOnly())
	return s.etcdFailure(err)
}

// etcdFailure turns an error of etcd into an exitError: wrong or missing
// credentials, or a user not allowed under the prefix (77); a request
// that the store cannot serve (64); an unavailable cluster (69). Other
// errors, and exitErrors, are returned as they are.
func (s *session) etcdFailure(err error) error {
	if settled(err) {
		return err
	}
	switch {
	case errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrInvalidAuthToken):
		return exitf(exitNoPerm, "etcd at %s asks for a user name and password (etcd://USER:PASSWORD@HOST...): %v", s.addr, rootCause(err))
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return exitf(exitNoPerm, "etcd at %s refused the credentials: %v", s.addr, rootCause(err))
	case isEtcdAuthError(err):
		return exitf(exitNoPerm, "etcd at %s refused a request to this user (its role needs readwrite on the prefix %q): %v", s.addr, s.prefix, rootCause(err))
	case errors.Is(err, distlock.ErrUnsupported):
		return s.unsupported("this request", err)
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return exitf(exitUnavailable, "cannot reach etcd at %s: no answer within %v (%s)", s.addr, pingTimeout, s.silent)
	}
	var eerr rpctypes.EtcdError
	if errors.As(err, &eerr) {
		return exitf(exitUnavailable, "etcd at %s: %v", s.addr, eerr)
	}
	return exitf(exitUnavailable, "cannot reach etcd at %s: %v", s.addr, rootCause(err))
}

// unsupported is the error of what, a kind of lock or a flag, that the
// session's store cannot serve, err: a usage error (64), as for the
// flags that Redlock cannot serve, since the same command line cannot
// work on this store.
func (s *session) unsupported(what string, err error) error {
	store := "Redis at " + s.addr
	switch {
	case s.etcd != nil:
		store = "the etcd store at " + s.addr
	case s.isSQL():
		store = "the " + s.dbms + " store at " + s.addr
	}
	return exitf(exitUsage, "%s is not supported by %s: %s", what, store, detail(err, distlock.ErrUnsupported))
}

// isEtcdAuthError reports whether err is etcd refusing the user name or
// password, or a request to this user.
func isEtcdAuthError(err error) bool {
	for _, e := range []error{rpctypes.ErrUserEmpty, rpctypes.ErrAuthFailed, rpctypes.ErrInvalidAuthToken,
		rpctypes.ErrPermissionDenied, rpctypes.ErrUserNotFound, rpctypes.ErrRoleNotGranted, rpctypes.ErrPermissionNotGranted} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
