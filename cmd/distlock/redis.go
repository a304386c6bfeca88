package main

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/sqlstore"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// defaultRedisURL is the Redis server used when neither --redis nor
// $REDIS_URL says otherwise.
const defaultRedisURL = "redis://127.0.0.1:6379"

// pingTimeout bounds the first exchange with Redis.
const pingTimeout = 10 * time.Second

func init() {
	// go-redis logs connection failures itself; distlock reports them once,
	// in its own words.
	redis.SetLogger(quietLogger{})
}

// quietLogger discards the log of go-redis.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// A session is a connection pool to one Redis deployment (a server, a
// Sentinel-managed master or a Cluster), to each master of a Redlock
// quorum, to an etcd cluster, or to a SQL database, and a distlock Client
// on it.
type session struct {
	rdb     redis.UniversalClient // the deployment; a Redlock's first master; nil on etcd and SQL
	masters []master              // a Redlock's masters; nil otherwise
	client  *distlock.Client
	addr    string     // where, for messages (never the password)
	prefix  string     // the key prefix of the locks
	tls     *tlsTarget // with rediss:// or etcds://: the first server, whose TLS ping checks

	etcd      *clientv3.Client // the etcd cluster; nil on Redis
	endpoints []string         // on etcd: HOST:PORT of each member given
	silent    string           // on etcd: what may keep it from answering, for messages

	pg       *pgxpool.Pool   // the PostgreSQL database; nil otherwise
	sqldb    *sql.DB         // the MariaDB or MySQL database; nil otherwise
	sqlStore *sqlstore.Store // on SQL: the store on pg or sqldb
	dbms     string          // on SQL: dbmsPostgres or dbmsMySQL, for messages
	table    string          // on SQL: the table of the locks, for messages

	closed atomic.Bool // Close was called
}

// A master is one Redis master of a Redlock quorum.
type master struct {
	rdb  redis.UniversalClient
	addr string
	tls  *tlsTarget
}

// newSession returns a session on the store of rf, without contacting it
// (but see newEtcdSession). A malformed URL is a usage error.
func newSession(rf *storeFlags, opts ...distlock.Option) (*session, error) {
	opts = append([]distlock.Option{distlock.WithLogger(nil)}, opts...)
	if len(rf.masters) > 0 {
		return newRedlockSession(rf, opts)
	}
	u, err := rf.resolvedURL()
	if err != nil {
		return nil, err
	}
	if !u.redisOnly {
		switch scheme, _, _ := strings.Cut(u.url, "://"); strings.ToLower(scheme) {
		case etcdScheme, etcdTLSScheme:
			return newEtcdSession(rf, u, opts)
		case postgresScheme, postgresqlScheme, mysqlScheme:
			return newSQLSession(rf, u, opts)
		case "redis", "rediss":
		default:
			return nil, usageErrorf("invalid store URL in %s: want redis://, rediss://, etcd://, etcds://, postgres:// or mysql://", u.from)
		}
	}
	rdb, addr, tls, err := dialRedisURL(u.url, u.from, rf.tls)
	if err != nil {
		return nil, err
	}
	return &session{rdb: rdb, client: distlock.New(redisstore.New(rdb, redisstore.WithPrefix(rf.prefix)), opts...), addr: addr, prefix: rf.prefix, tls: tls}, nil
}

// newRedlockSession returns a session on the Redlock masters of rf.
func newRedlockSession(rf *storeFlags, opts []distlock.Option) (*session, error) {
	switch {
	case rf.url != "":
		return nil, usageErrorf("--redis and --redlock exclude each other: give one Redis with --redis, or each master of a Redlock quorum with --redlock")
	case rf.store != "":
		return nil, usageErrorf("--store and --redlock exclude each other: give one store with --store, or each master of a Redlock quorum with --redlock")
	}
	s := &session{prefix: rf.prefix}
	var rdbs []redis.UniversalClient
	var addrs []string
	for i, u := range rf.masters {
		from := "--redlock"
		if len(rf.masters) > 1 {
			from = fmt.Sprintf("the %s --redlock", ordinal(i+1))
		}
		rdb, addr, tls, err := dialRedisURL(u, from, rf.tls)
		if err != nil {
			s.closeMasters()
			return nil, err
		}
		s.masters = append(s.masters, master{rdb: rdb, addr: addr, tls: tls})
		rdbs, addrs = append(rdbs, rdb), append(addrs, addr)
	}
	s.rdb, s.tls = rdbs[0], s.masters[0].tls
	s.addr = "the Redlock masters " + strings.Join(addrs, ", ")
	s.client = distlock.New(redisstore.NewRedlock(rdbs, redisstore.WithPrefix(rf.prefix)), opts...)
	return s, nil
}

// dialRedisURL returns a client for the Redis that the URL s names, a
// description of where it is for messages and, for rediss://, the first
// server to check that it speaks TLS, without contacting it; files, the
// TLS flags, add to the TLS configuration of a rediss:// URL:
//
//   - with a master_name parameter, the master that the Sentinels at the
//     URL's host and its addr parameters monitor (go-redis's
//     ParseFailoverURL form: the URL's user and password are the
//     Sentinels', the master's are the username and password parameters);
//   - with addr parameters or cluster=true, a Cluster whose seed nodes are
//     the URL's host and its addr parameters (ParseClusterURL's form);
//   - otherwise one server (ParseURL's form).
//
// A malformed URL, or one whose host or addr parameters are not
// addresses HOST[:PORT] (see checkAddr), is a usage error that names
// where the URL comes from, from: "--redis", "$REDIS_URL", ... Its errors
// never repeat the URL, which may hold a password.
func dialRedisURL(s, from string, files tlsFiles) (redis.UniversalClient, string, *tlsTarget, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, "", nil, badURL(from, err)
	}
	switch {
	case (u.Scheme == etcdScheme || u.Scheme == etcdTLSScheme) && from == "--redis":
		return nil, "", nil, usageErrorf("invalid Redis URL in %s: want a redis:// or rediss:// URL (give an etcd:// URL with --store)", from)
	case u.Scheme == etcdScheme || u.Scheme == etcdTLSScheme:
		return nil, "", nil, usageErrorf("invalid Redis URL in %s: want a redis:// or rediss:// URL (give an etcd:// URL with --store or $%s)", from, storeEnv)
	case isSQLScheme(strings.ToLower(u.Scheme)) && from == "--redis":
		return nil, "", nil, usageErrorf("invalid Redis URL in %s: want a redis:// or rediss:// URL (give a %s:// URL with --store)", from, u.Scheme)
	case isSQLScheme(strings.ToLower(u.Scheme)):
		return nil, "", nil, usageErrorf("invalid Redis URL in %s: want a redis:// or rediss:// URL (give a %s:// URL with --store or $%s)", from, u.Scheme, storeEnv)
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return nil, "", nil, usageErrorf("invalid Redis URL in %s: want a redis:// or rediss:// URL", from)
	}
	q := u.Query()
	for _, addr := range append([]string{u.Host}, q["addr"]...) {
		if err := checkAddr(addr); err != nil {
			return nil, "", nil, badURL(from, err)
		}
	}
	switch {
	case q.Has("master_name"):
		opt, err := redis.ParseFailoverURL(s)
		if err != nil {
			return nil, "", nil, badURL(from, err)
		}
		if err := withTLSFiles(opt.TLSConfig, files, from); err != nil {
			return nil, "", nil, err
		}
		where := fmt.Sprintf("master %q of the Sentinels at %s", opt.MasterName, strings.Join(opt.SentinelAddrs, ","))
		return redis.NewFailoverClient(opt), where, newTLSTarget(opt.SentinelAddrs, opt.TLSConfig, "rediss"), nil
	case q.Has("addr") || q.Has("cluster"):
		if c := q.Get("cluster"); c != "" && c != "true" && c != "1" {
			return nil, "", nil, usageErrorf("invalid Redis URL in %s: cluster=%s (want cluster=true)", from, c)
		}
		q.Del("cluster")
		u.RawQuery = q.Encode()
		opt, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, "", nil, badURL(from, err)
		}
		if err := withTLSFiles(opt.TLSConfig, files, from); err != nil {
			return nil, "", nil, err
		}
		return redis.NewClusterClient(opt), "the Cluster at " + strings.Join(opt.Addrs, ","), newTLSTarget(opt.Addrs, opt.TLSConfig, "rediss"), nil
	}
	opt, err := redis.ParseURL(s)
	if err != nil {
		return nil, "", nil, badURL(from, err)
	}
	if opt.Network != "tcp" {
		return nil, "", nil, usageErrorf("invalid Redis URL in %s: want a redis:// or rediss:// URL", from)
	}
	if err := withTLSFiles(opt.TLSConfig, files, from); err != nil {
		return nil, "", nil, err
	}
	return redis.NewClient(opt), opt.Addr, newTLSTarget([]string{opt.Addr}, opt.TLSConfig, "rediss"), nil
}

// withTLSFiles adds the TLS files to config, the TLS configuration of
// the Redis URL from from; a nil config (a redis:// URL) takes none.
func withTLSFiles(config *tls.Config, files tlsFiles, from string) error {
	if config == nil {
		if files.set() {
			return files.errNotTLS(from)
		}
		return nil
	}
	return files.apply(config)
}

// badURL is the usage error of a URL from from that is malformed, or
// that go-redis refused, without the URL itself.
func badURL(from string, err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return usageErrorf("invalid Redis URL in %s: %v (want redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss://..., or the Sentinel and Cluster forms of distlock help)", from, err)
}

// ready checks, in this order, that the options are valid (without I/O):
// those of the client, and the name and options of the lock l unless it
// is nil; and that Redis answers and accepts our credentials.
func (s *session) ready(ctx context.Context, l interface {
	Name() string
	Err() error
}) error {
	if err := s.client.Err(); err != nil {
		return err
	}
	if l != nil {
		err := l.Err()
		if errors.Is(err, distlock.ErrInvalidName) {
			// As checkName says it.
			return exitf(exitBadName, "invalid lock name %q: %s", l.Name(), detail(err, distlock.ErrInvalidName))
		}
		if k, ok := l.(interface{ kind() lockKind }); ok && errors.Is(err, distlock.ErrUnsupported) {
			// A kind of lock that the store does not keep (yet).
			return s.unsupported(k.kind().flags(), err)
		}
		if err != nil {
			return err
		}
	}
	return s.ping(ctx)
}

// ping checks that Redis answers and accepts our credentials, so that an
// unreachable server or a wrong password is reported as such before
// anything else happens.
func (s *session) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	switch {
	case s.masters != nil:
		return s.pingQuorum(ctx)
	case s.etcd != nil:
		return s.pingEtcd(ctx)
	case s.isSQL():
		return s.pingSQL(ctx)
	}
	if err := s.tls.check(ctx); err != nil {
		return exitf(exitUnavailable, "cannot reach Redis at %s: %v", s.addr, err)
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return s.failure(err)
	}
	return nil
}

// failure turns an error of Redis into an exitError: wrong credentials
// (77) or an unavailable server (69). Other errors, and exitErrors, are
// returned as they are.
func (s *session) failure(err error) error {
	if settled(err) {
		return err
	}
	switch {
	case s.etcd != nil:
		return s.etcdFailure(err)
	case s.isSQL():
		return s.sqlFailure(err)
	case isAuthError(err):
		return exitf(exitNoPerm, "Redis at %s refused the credentials: %v", s.addr, rootCause(err))
	case errors.Is(err, distlock.ErrUnsupported):
		return exitf(exitUnavailable, "Redis at %s: %v", s.addr, err)
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, distlock.ErrBackend), errors.Is(err, context.DeadlineExceeded), !isRedisError(err):
		return exitf(exitUnavailable, "cannot reach Redis at %s: %v", s.addr, rootCause(err))
	}
	return exitf(exitUnavailable, "Redis at %s: %v", s.addr, rootCause(err))
}

// pingQuorum pings every Redlock master at once. A quorum that answers
// will do: it warns of the others, and fails, as ping does, with the
// first failure when fewer than a quorum answer.
func (s *session) pingQuorum(ctx context.Context) error {
	errs := make([]error, len(s.masters))
	var wg sync.WaitGroup
	for i, m := range s.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.tls.check(ctx); err != nil {
				errs[i] = exitf(exitUnavailable, "cannot reach Redis at %s: %v", m.addr, err)
			} else if err := m.rdb.Ping(ctx).Err(); err != nil {
				errs[i] = (&session{addr: m.addr}).failure(err)
			}
		}()
	}
	wg.Wait()
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, err)
			warnf("Redlock master %s: %v", s.masters[i].addr, err)
		}
	}
	if len(s.masters)-len(failed) < len(s.masters)/2+1 {
		return failed[0]
	}
	return nil
}

// Close releases what the session still holds and closes its connections.
// It waits for the requests still on their way. Calling it again does
// nothing, at once.
func (s *session) Close() {
	if s.closed.Swap(true) {
		return
	}
	_ = s.client.Close()
	switch {
	case s.masters != nil:
		s.closeMasters()
	case s.etcd != nil:
		_ = s.etcd.Close()
	case s.isSQL():
		s.closeSQL()
	default:
		_ = s.rdb.Close()
	}
}

// closeMasters closes the connections to a Redlock's masters.
func (s *session) closeMasters() {
	for _, m := range s.masters {
		_ = m.rdb.Close()
	}
}

// closeWithin closes the session, waiting at most d for the requests
// still on their way; distlock is about to exit.
func (s *session) closeWithin(d time.Duration) {
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(d):
	}
}

// isAuthError reports whether err is Redis refusing the user name or
// password, or refusing a command to this user.
func isAuthError(err error) bool {
	for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "AUTH"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// isRedisError reports whether err is an error reply of the server.
func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// rootCause returns the part of err that says what went wrong with the
// store: the error reply of Redis, etcd or a SQL database, or the network error, without
// the layers of context added on the way up; err itself if there is
// none of them.
func rootCause(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return rerr
	}
	var eerr rpctypes.EtcdError
	if errors.As(err, &eerr) {
		return eerr
	}
	var nerr *net.OpError
	if errors.As(err, &nerr) {
		return nerr
	}
	return err
}

// warnf prints a warning on stderr.
func warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "distlock: warning: "+format+"\n", args...)
}
