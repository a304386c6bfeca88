package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel group settings. The short timeouts make failovers take about a
// second or two instead of the defaults' half a minute and more.
const (
	// sentinelMasterName is the name the sentinels monitor the master as.
	sentinelMasterName = "distlock"
	// sentinelCount is how many sentinels a group has; sentinelQuorum of
	// them must agree that the master is down.
	sentinelCount  = 3
	sentinelQuorum = 2
	// downAfter is the sentinels' down-after-milliseconds.
	downAfter = 500
	// failoverTimeout is the sentinels' failover-timeout in ms.
	failoverTimeout = 2000
	// groupTimeout bounds the set-up of a group.
	groupTimeout = 30 * time.Second
)

// A Sentinel is a replicated Redis deployment started by this package: one
// master, some replicas and three sentinels (redis-server --sentinel)
// monitoring them, all on free ports of 127.0.0.1.
//
// Each data server replicates with its own ACL user, so that
// [Sentinel.CutReplication] can stop one replica's replication
// deterministically. The sentinels use down-after-milliseconds 500 and
// failover-timeout 2000, with a quorum of 2, so an automatic failover after
// the master is killed or paused usually completes within a few seconds;
// their periodic INFO polls, hello messages and questions to each other are
// shortened to 200 ms with SENTINEL DEBUG (Redis 7.0 and later). Diskless
// full syncs start at once (repl-diskless-sync-delay 0).
//
// A Sentinel is safe for concurrent use. Its servers can be killed, paused
// and restarted like any [Server].
type Sentinel struct {
	password  string
	servers   []*Server // data servers; servers[0] is the first master
	sentinels []*Server
}

// NewSentinel starts a master, replicas (at least 1) replicas of it
// and three sentinels monitoring the master, and returns once every replica
// is in sync with the master and every sentinel knows the master, every
// replica and the two other sentinels. The caller must call
// [Sentinel.Stop]; tests should use [StartSentinel].
//
// opts apply to the master and the replicas (not to the sentinels, which
// have no password); with [WithPassword] the sentinels are given the
// password to talk to them. Do not set replicaof, masteruser or masterauth
// with [WithArgs]: the group relies on its own.
func NewSentinel(replicas int, opts ...Option) (*Sentinel, error) {
	if replicas < 1 {
		return nil, errors.New("redistest: a sentinel group needs at least one replica")
	}
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	g := &Sentinel{password: cfg.password}
	pw, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	// Every data server knows every replication user, so that any of them
	// can be the master after a failover.
	// A full sync starts at once rather than after the default 5 s that a
	// diskless sync waits for more replicas.
	users := []Option{WithArgs("--repl-diskless-sync-delay", "0")}
	for i := 0; i <= replicas; i++ {
		users = append(users, WithArgs("--user", replUser(i), "on", ">"+pw, "~*", "&*", "+@all"))
	}
	for i := 0; i <= replicas; i++ {
		o := append(append([]Option{}, users...), WithArgs("--masteruser", replUser(i), "--masterauth", pw))
		if i > 0 {
			o = append(o, WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(g.servers[0].Port())))
		}
		s, err := NewServer(append(o, opts...)...)
		if err != nil {
			return nil, errors.Join(err, g.Stop())
		}
		g.servers = append(g.servers, s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	if err := g.AwaitSync(ctx); err != nil {
		return nil, errors.Join(err, g.Stop())
	}

	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s %[6]d\n",
		sentinelMasterName, g.servers[0].Port(), sentinelQuorum, downAfter, failoverTimeout, replicas)
	if cfg.password != "" {
		conf += fmt.Sprintf("sentinel auth-pass %s %s\n", sentinelMasterName, cfg.password)
	}
	for i := 0; i < sentinelCount; i++ {
		s, err := NewServer(func(c *config) { c.sentinelConf = conf })
		if err != nil {
			return nil, errors.Join(err, g.Stop())
		}
		g.sentinels = append(g.sentinels, s)
		if err := speedUp(ctx, s); err != nil {
			return nil, errors.Join(err, g.Stop())
		}
	}
	if err := g.awaitSentinels(ctx, replicas); err != nil {
		return nil, errors.Join(err, g.Stop())
	}
	return g, nil
}

// StartSentinel starts a sentinel group as [NewSentinel] does for the
// test tb, and stops it when the test ends. If the group cannot be started,
// StartSentinel calls tb.Fatal.
func StartSentinel(tb TB, replicas int, opts ...Option) *Sentinel {
	tb.Helper()
	g, err := NewSentinel(replicas, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := g.Stop(); err != nil {
			tb.Errorf("redistest: stop sentinel group: %v", err)
		}
	})
	return g
}

// sentinelPeriod is the period, in ms, of the sentinels' INFO polls of the
// servers, of their hello messages and of their questions to each other
// about a master that looks down, instead of 10 s, 2 s and 1 s: sentinels
// find each other, notice a role change and agree that a master is down
// within a fraction of a second.
const sentinelPeriod = "200"

// speedUp shortens the sentinel's periods with SENTINEL DEBUG (Redis 7.0
// and later). With an older sentinel it does nothing: the group works,
// more slowly.
func speedUp(ctx context.Context, s *Server) error {
	sc := sentinelClient(s)
	defer sc.Close()
	err := sc.Process(ctx, redis.NewStatusCmd(ctx, "SENTINEL", "DEBUG",
		"info-period", sentinelPeriod, "publish-period", sentinelPeriod, "ask-period", sentinelPeriod))
	if err != nil && !strings.Contains(strings.ToLower(err.Error()), "unknown") {
		return fmt.Errorf("redistest: SENTINEL DEBUG at %s: %w", s.Addr(), err)
	}
	return nil
}

func replUser(i int) string { return "replica" + strconv.Itoa(i) }

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("redistest: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// awaitSentinels waits until every sentinel knows the master, the given
// number of replicas and the other sentinels. Sentinels find each other
// through hello messages sent every 2 seconds, so this takes a moment.
func (g *Sentinel) awaitSentinels(ctx context.Context, replicas int) error {
	for _, s := range g.sentinels {
		sc := redis.NewSentinelClient(s.Options())
		var last string
		err := waitFor(ctx, func() bool {
			m, err := sc.Master(ctx, sentinelMasterName).Result()
			if err != nil {
				last = err.Error()
				return false
			}
			last = fmt.Sprintf("flags=%s num-slaves=%s num-other-sentinels=%s", m["flags"], m["num-slaves"], m["num-other-sentinels"])
			return m["flags"] == "master" && m["num-slaves"] == strconv.Itoa(replicas) &&
				m["num-other-sentinels"] == strconv.Itoa(sentinelCount-1)
		})
		sc.Close()
		if err != nil {
			return fmt.Errorf("redistest: sentinel at %s not ready (%s): %w", s.Addr(), last, err)
		}
	}
	return nil
}

// sentinelClient returns a client for the sentinel s that gives up after a
// second, so that a paused sentinel does not hold up the caller.
func sentinelClient(s *Server) *redis.SentinelClient {
	opt := s.Options()
	opt.MaxRetries = -1
	opt.ReadTimeout = time.Second
	return redis.NewSentinelClient(opt)
}

// MasterName returns the name the sentinels monitor the master as, for
// redis.FailoverOptions.MasterName.
func (g *Sentinel) MasterName() string { return sentinelMasterName }

// SentinelAddrs returns the sentinels' addresses, for
// redis.FailoverOptions.SentinelAddrs.
func (g *Sentinel) SentinelAddrs() []string {
	var out []string
	for _, s := range g.sentinels {
		out = append(out, s.Addr())
	}
	return out
}

// Sentinels returns the sentinel processes, which can be killed, paused and
// restarted like any Server (a restarted sentinel keeps its configuration).
func (g *Sentinel) Sentinels() []*Server { return append([]*Server(nil), g.sentinels...) }

// Servers returns the data servers in the order they were started: the
// first master, then the replicas. After a failover the master is another
// one; use [Sentinel.Master] to find it.
func (g *Sentinel) Servers() []*Server { return append([]*Server(nil), g.servers...) }

// FailoverOptions returns new go-redis failover options for the group:
// its master name, its sentinels and the password set with [WithPassword]
// if any. The caller may modify the result.
func (g *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:    sentinelMasterName,
		SentinelAddrs: g.SentinelAddrs(),
		Password:      g.password,
	}
}

// FailoverClient returns a new go-redis failover client
// (redis.NewFailoverClient with [Sentinel.FailoverOptions]), which follows
// the master the sentinels name, and registers a cleanup function with tb
// that closes it.
func (g *Sentinel) FailoverClient(tb TB) *redis.Client {
	tb.Helper()
	c := redis.NewFailoverClient(g.FailoverOptions())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// byAddr returns the group's data server at addr.
func (g *Sentinel) byAddr(addr string) (*Server, error) {
	for _, s := range g.servers {
		if s.Addr() == addr {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redistest: %s is not a server of this group", addr)
}

// Master returns the current master as the sentinels report it
// (SENTINEL GET-MASTER-ADDR-BY-NAME): every sentinel that answers must name
// the same server, or Master returns an error (as it does during a failover,
// while the sentinels learn of it). A sentinel that does not answer (killed
// or paused) is skipped; at least one must answer.
func (g *Sentinel) Master(ctx context.Context) (*Server, error) {
	named, err := g.namedMasters(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range named[1:] {
		if a != named[0] {
			return nil, fmt.Errorf("redistest: sentinels disagree on the master: %s and %s", named[0], a)
		}
	}
	return g.byAddr(named[0])
}

// namedMasters returns the address of the master each sentinel that
// answers names (at least one must).
func (g *Sentinel) namedMasters(ctx context.Context) ([]string, error) {
	var named []string
	for _, s := range g.sentinels {
		if s.PID() == 0 {
			continue
		}
		sc := sentinelClient(s)
		a, err := sc.GetMasterAddrByName(ctx, sentinelMasterName).Result()
		sc.Close()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		named = append(named, net.JoinHostPort(a[0], a[1]))
	}
	if len(named) == 0 {
		return nil, errors.New("redistest: no sentinel answered")
	}
	return named, nil
}

// Replicas returns the group's data servers other than the current master
// (see [Sentinel.Master]), in the order they were started, whether or not
// they are running or in sync.
func (g *Sentinel) Replicas(ctx context.Context) ([]*Server, error) {
	m, err := g.Master(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Server
	for _, s := range g.servers {
		if s != m {
			out = append(out, s)
		}
	}
	return out, nil
}

// AwaitMaster waits until the sentinels agree on a master other than the
// server at notAddr (for example the address of a master just killed or
// paused) and that server reports role:master, and returns it. With
// notAddr "" any agreed master will do. It returns ctx's error if that does
// not happen before ctx ends.
func (g *Sentinel) AwaitMaster(ctx context.Context, notAddr string) (*Server, error) {
	var m *Server
	var last error
	err := waitFor(ctx, func() bool {
		m, last = g.Master(ctx)
		if last != nil {
			return false
		}
		if m.Addr() == notAddr {
			last = fmt.Errorf("sentinels still name %s", notAddr)
			return false
		}
		role, err := g.info(ctx, m, "role")
		if err != nil || role != "master" {
			last = fmt.Errorf("%s reports role %q (%v)", m.Addr(), role, err)
			return false
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("redistest: no new master: %v: %w", last, err)
	}
	return m, nil
}

// Failover asks a sentinel for a failover (SENTINEL FAILOVER, which needs
// no agreement and a reachable master), waits as [Sentinel.AwaitMaster]
// does until every sentinel names the new master, and returns it. It asks
// again, until ctx ends, when the sentinels refused because they did not
// yet see a replica in good standing (NOGOODSLAVE, right after a start or
// a failover) or were still busy with one (INPROG), and when, 10 s after
// they accepted it, every sentinel still names the old master (an accepted
// failover that was not carried out, seen on a loaded machine); while some
// sentinel names another master, the failover is under way and it waits.
// Any other refusal is returned at once. Give ctx a deadline. The old
// master becomes a replica of the new one a moment later; use
// [Sentinel.AwaitSync] to wait for that.
func (g *Sentinel) Failover(ctx context.Context) (*Server, error) {
	old, err := g.Master(ctx)
	if err != nil {
		return nil, err
	}
	for {
		err := g.askFailover(ctx)
		if err != nil && !strings.Contains(err.Error(), "NOGOODSLAVE") && !strings.Contains(err.Error(), "INPROG") {
			return nil, err
		}
		if err == nil {
			for {
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				m, aerr := g.AwaitMaster(actx, old.Addr())
				cancel()
				if aerr == nil {
					return m, nil
				}
				err = aerr
				if ctx.Err() != nil || !g.movingFrom(ctx, old) {
					break
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// movingFrom reports whether some sentinel that answers names a master
// other than old: a failover from old is under way.
func (g *Sentinel) movingFrom(ctx context.Context, old *Server) bool {
	named, _ := g.namedMasters(ctx)
	for _, a := range named {
		if a != old.Addr() {
			return true
		}
	}
	return false
}

// askFailover sends SENTINEL FAILOVER to the first sentinel that takes it.
func (g *Sentinel) askFailover(ctx context.Context) error {
	var errs []error
	for _, s := range g.sentinels {
		if s.PID() == 0 {
			continue
		}
		sc := sentinelClient(s)
		err := sc.Failover(ctx, sentinelMasterName).Err()
		sc.Close()
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", s.Addr(), err))
	}
	return fmt.Errorf("redistest: SENTINEL FAILOVER: %w", errors.Join(errs...))
}

// AwaitSync waits until every running data server other than the current
// master is its replica with master_link_status:up (INFO replication) and
// has processed the master's replication stream up to the master's offset
// at the time of the call, and the master streams to them all: a PUBLISH
// on the master (which replicates) is acknowledged by every one of them
// (WAIT). After a full sync the master streams to a replica, and WAIT
// counts it, only from the replica's first acknowledgement, up to a second
// after the replica reports its link up. Before the sentinels are
// started, the current master is the first server. A replica whose
// replication is cut ([Sentinel.CutReplication]) never gets in sync.
func (g *Sentinel) AwaitSync(ctx context.Context) error {
	m := g.servers[0]
	if len(g.sentinels) > 0 {
		var err error
		if m, err = g.Master(ctx); err != nil {
			return err
		}
	}
	var last string
	target := int64(-1) // the master's offset, read once
	err := waitFor(ctx, func() bool {
		if target < 0 {
			off, err := g.info(ctx, m, "master_repl_offset")
			if err != nil {
				last = fmt.Sprintf("master %s: %v", m.Addr(), err)
				return false
			}
			target, _ = strconv.ParseInt(off, 10, 64)
		}
		replicas := 0
		for _, s := range g.servers {
			if s == m || s.PID() == 0 {
				continue
			}
			st, err := g.infoAll(ctx, s)
			if err != nil {
				last = fmt.Sprintf("replica %s: %v", s.Addr(), err)
				return false
			}
			if st["role"] != "slave" || st["master_port"] != strconv.Itoa(m.Port()) || st["master_link_status"] != "up" {
				last = fmt.Sprintf("replica %s: role=%s master_port=%s master_link_status=%s",
					s.Addr(), st["role"], st["master_port"], st["master_link_status"])
				return false
			}
			if a, _ := strconv.ParseInt(st["slave_repl_offset"], 10, 64); a < target {
				last = fmt.Sprintf("replica %s at offset %d, master at %d", s.Addr(), a, target)
				return false
			}
			replicas++
		}
		if n, err := streamed(ctx, m, replicas); err != nil || n < replicas {
			last = fmt.Sprintf("master %s: %d of %d replicas acknowledge its stream (%v)", m.Addr(), n, replicas, err)
			return false
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("redistest: replicas not in sync (%s): %w", last, err)
	}
	return nil
}

// streamed publishes on m's sync channel, which replicates, and returns
// how many replicas acknowledged it (WAIT for replicas of them, on the
// same connection, for 100 ms at most).
func streamed(ctx context.Context, m *Server, replicas int) (int, error) {
	rdb := redis.NewClient(m.Options())
	defer rdb.Close()
	pipe := rdb.Pipeline()
	pipe.Publish(ctx, "__redistest__:sync", "")
	wait := redis.NewIntCmd(ctx, "wait", replicas, 100)
	_ = pipe.Process(ctx, wait)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	return int(wait.Val()), nil
}

// CutReplication stops replica from replicating: its replication user is
// disabled on every running data server and its replication connections are
// closed, so nothing written afterwards reaches it until
// [Sentinel.RestoreReplication], even after a failover (unless replica
// itself becomes the master). The replica keeps serving reads and reports
// master_link_status:down; the sentinels still see it and may promote it,
// which is what a replica that lagged behind looks like. When
// CutReplication returns, the link is closed.
func (g *Sentinel) CutReplication(ctx context.Context, replica *Server) error {
	return g.setReplication(ctx, replica, false)
}

// RestoreReplication undoes [Sentinel.CutReplication]: the replica's
// replication user is enabled again on every running data server. The
// replica reconnects by itself within about a second; use
// [Sentinel.AwaitSync] to wait until it is in sync.
func (g *Sentinel) RestoreReplication(ctx context.Context, replica *Server) error {
	return g.setReplication(ctx, replica, true)
}

// setReplication enables or disables replica's replication user on every
// running data server but replica; disabling also closes its connections.
func (g *Sentinel) setReplication(ctx context.Context, replica *Server, on bool) error {
	user, err := g.userOf(replica)
	if err != nil {
		return err
	}
	what, state := "cut", "off"
	if on {
		what, state = "restore", "on"
	}
	for _, s := range g.servers {
		if s == replica || s.PID() == 0 {
			continue
		}
		rdb := redis.NewClient(s.Options())
		err := rdb.Do(ctx, "ACL", "SETUSER", user, state).Err()
		if err == nil && !on {
			err = rdb.Do(ctx, "CLIENT", "KILL", "USER", user).Err()
			if err != nil && strings.Contains(err.Error(), "No such client") {
				err = nil
			}
		}
		rdb.Close()
		if err != nil {
			return fmt.Errorf("redistest: %s replication of %s at %s: %w", what, replica.Addr(), s.Addr(), err)
		}
	}
	return nil
}

// userOf is the ACL user that replica replicates with.
func (g *Sentinel) userOf(replica *Server) (string, error) {
	for i, s := range g.servers {
		if s == replica {
			return replUser(i), nil
		}
	}
	return "", fmt.Errorf("redistest: %s is not a server of this group", replica.Addr())
}

// info returns one field of s's INFO replication.
func (g *Sentinel) info(ctx context.Context, s *Server, field string) (string, error) {
	all, err := g.infoAll(ctx, s)
	if err != nil {
		return "", err
	}
	return all[field], nil
}

// infoAll returns s's INFO replication as a map.
func (g *Sentinel) infoAll(ctx context.Context, s *Server) (map[string]string, error) {
	return infoReplication(ctx, s)
}

// Stop stops the sentinels, then the data servers; it is idempotent.
func (g *Sentinel) Stop() error {
	var errs []error
	for _, s := range g.sentinels {
		errs = append(errs, s.Stop())
	}
	for _, s := range g.servers {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}
