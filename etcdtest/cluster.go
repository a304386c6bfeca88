package etcdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Raft timing of every member: a tenth of etcd's defaults (100 ms and
// 1 s), so that a new leader is elected within about a second of a leader's
// death. etcd raises any lease TTL below ceil(1.5 × ElectionTimeout), here
// 1 s.
const (
	HeartbeatInterval = 50 * time.Millisecond
	ElectionTimeout   = 500 * time.Millisecond
)

const (
	// startAttempts is how many sets of ports NewCluster tries, and how
	// many times Restart tries its member's ports, when a port turns out
	// to be taken.
	startAttempts = 5
	// readyTimeout bounds how long NewCluster and Restart wait for members
	// to be ready to serve.
	readyTimeout = 30 * time.Second
	// pollInterval is how often Leader and TransferLeader look at the
	// members' Raft state while waiting for it to change.
	pollInterval = 10 * time.Millisecond
	// dialTimeout is the DialTimeout of the clients from ClientConfig.
	dialTimeout = 5 * time.Second
)

// ErrStopped is returned by methods that need a cluster that has not been
// stopped, such as [Member.Restart], after [Cluster.Stop].
var ErrStopped = errors.New("etcdtest: cluster stopped")

// ErrNotRunning is returned by methods that need a running member, such as
// [Cluster.TransferLeader] to a member that is stopped.
var ErrNotRunning = errors.New("etcdtest: member not running")

// A Cluster is a set of etcd members run in-process by this package, each
// on its own loopback ports, with its own data directory and a [Proxy] in
// front of its client port.
//
// A Cluster is safe for concurrent use by multiple goroutines.
type Cluster struct {
	dir     string // parent of the members' data directories
	ownDir  bool   // dir was made by NewCluster: Stop removes it
	token   string // initial cluster token, unique per cluster
	members []*Member

	mu      sync.Mutex
	stopped bool
}

// NewCluster starts a cluster of n etcd members (typically 1 or 3) and
// returns once every member is ready to serve clients. It is meant for code
// that is not a test, such as demos and benchmarks; the caller must call
// [Cluster.Stop]. Tests should use [Start] instead.
//
// The members are named m0, m1, …; their data directories are dir/m0,
// dir/m1, … and must not exist yet. If dir is "", NewCluster makes a
// temporary directory, which Stop removes; otherwise Stop removes only the
// members' data directories. Each member listens for clients and peers on
// free ports of 127.0.0.1; if a port turns out to be taken, NewCluster
// retries with other ports. On failure nothing is left running or on disk.
func NewCluster(n int, dir string) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcdtest: %d members: need at least 1", n)
	}
	c := &Cluster{dir: dir, token: "etcdtest-" + randomHex(8)}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "etcdtest-")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: create cluster directory: %w", err)
		}
		c.dir, c.ownDir = d, true
	}
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		d := filepath.Join(c.dir, name)
		if _, err := os.Lstat(d); err == nil {
			return nil, fmt.Errorf("etcdtest: data directory %s exists already", d)
		} else if !errors.Is(err, os.ErrNotExist) {
			_ = c.removeDirs()
			return nil, fmt.Errorf("etcdtest: data directory: %w", err)
		}
		c.members = append(c.members, &Member{c: c, name: name, dir: d})
	}

	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		err = c.startAll()
		if err == nil || !isAddrInUse(err) {
			break
		}
	}
	if err == nil {
		err = c.startProxies()
		if err != nil {
			c.stopAll()
		}
	}
	if err != nil {
		if rerr := c.removeDirs(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, fmt.Errorf("etcdtest: start %d members: %w", n, err)
	}
	return c, nil
}

// Start starts a cluster of n members for the test or benchmark tb, as
// [NewCluster] does with a directory from tb.TempDir, and registers a
// cleanup function with tb that stops it. If the cluster cannot be started,
// Start calls tb.Fatalf.
func Start(tb TB, n int) *Cluster {
	tb.Helper()
	c, err := NewCluster(n, tb.TempDir())
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("etcdtest: stop cluster: %v", err)
		}
	})
	return c
}

// startAll picks ports for every member, starts them all and waits until
// they are ready. On failure it leaves no member running and the data
// directories removed, and the error wraps syscall.EADDRINUSE if a port
// was taken.
func (c *Cluster) startAll() error {
	ports, err := freePorts(2 * len(c.members))
	if err != nil {
		return fmt.Errorf("pick ports: %w", err)
	}
	var initial []string
	for i, m := range c.members {
		m.clientPort, m.peerPort = ports[2*i], ports[2*i+1]
		initial = append(initial, m.name+"="+m.PeerURL())
	}
	for _, m := range c.members {
		m.initialCluster = strings.Join(initial, ",")
	}
	// Start every member before waiting for any: a member is ready only
	// once a quorum has elected a leader.
	for _, m := range c.members {
		if err = m.launch(); err != nil {
			break
		}
	}
	if err == nil {
		for _, m := range c.members {
			if err = awaitReady(m.e.Load()); err != nil {
				err = fmt.Errorf("member %s: %w", m.name, err)
				break
			}
		}
	}
	if err == nil {
		for _, m := range c.members {
			m.id = uint64(m.e.Load().Server.MemberID())
		}
		return nil
	}
	c.stopAll()
	if rerr := c.removeMemberDirs(); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

func (c *Cluster) startProxies() error {
	for _, m := range c.members {
		p, err := NewProxy(m.clientAddr())
		if err != nil {
			for _, m := range c.members {
				if m.proxy != nil {
					_ = m.proxy.Close()
				}
			}
			return err
		}
		m.proxy = p
	}
	return nil
}

// stopAll stops every running member at once without coordination: no
// leadership transfer, which could wait for members that are stopping too.
func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for _, m := range c.members {
		if e := m.e.Swap(nil); e != nil {
			wg.Go(func() { crash(e) })
		}
	}
	wg.Wait()
}

// removeDirs removes the data directories of the members, and the cluster
// directory if NewCluster made it.
func (c *Cluster) removeDirs() error {
	if c.ownDir {
		return os.RemoveAll(c.dir)
	}
	return c.removeMemberDirs()
}

// removeMemberDirs removes the data directories of the members.
func (c *Cluster) removeMemberDirs() error {
	var err error
	for _, m := range c.members {
		err = errors.Join(err, os.RemoveAll(m.dir))
	}
	return err
}

// Members returns the cluster's members, in the order of their names (m0,
// m1, …). The slice is a copy; the members are the cluster's own.
func (c *Cluster) Members() []*Member {
	return append([]*Member(nil), c.members...)
}

// Endpoints returns the client URLs of all members ("http://127.0.0.1:PORT"),
// in the order of [Cluster.Members], whether or not they are running.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.Endpoint()
	}
	return eps
}

// ProxyEndpoints returns the URLs of the members' proxies, in the order of
// [Cluster.Members].
func (c *Cluster) ProxyEndpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.ProxyEndpoint()
	}
	return eps
}

// Client returns a client for all the members' [Cluster.Endpoints], as
// [Dial] does: it is closed when the test ends, before a cluster started by
// [Start] is stopped.
func (c *Cluster) Client(tb TB) *clientv3.Client {
	tb.Helper()
	return Dial(tb, c.Endpoints()...)
}

// ClientConfig returns the configuration of the clients made by this
// package for endpoints: a 5 s dial timeout and no logging. The caller may
// modify it.
func ClientConfig(endpoints ...string) clientv3.Config {
	return clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		Logger:      zap.NewNop(),
	}
}

// Dial returns a client for endpoints made from [ClientConfig] and
// registers a cleanup function with tb that closes it. It calls tb.Fatalf
// if the client cannot be made.
func Dial(tb TB, endpoints ...string) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(ClientConfig(endpoints...))
	if err != nil {
		tb.Fatalf("etcdtest: client for %v: %v", endpoints, err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Leader waits until every running member reports the same leader, itself
// one of the running members, and returns it. While a dead leader's
// followers still believe in it, or an election is under way, it waits,
// looking every 10 ms, until ctx is done; the error then says what each
// running member reported.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		lead, state := c.agreedLeader()
		if lead != nil {
			return lead, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcdtest: no leader agreed by the running members (%s): %w", state, ctx.Err())
		case <-t.C:
		}
	}
}

// agreedLeader returns the leader if every running member reports the same
// running one; otherwise nil and what each member reports.
func (c *Cluster) agreedLeader() (*Member, string) {
	var lead uint64
	agreed, running := true, 0
	var state []string
	for _, m := range c.members {
		e := m.e.Load()
		if e == nil {
			state = append(state, m.name+": stopped")
			continue
		}
		l := e.Server.Lead()
		state = append(state, fmt.Sprintf("%s: leader %x", m.name, l))
		if running == 0 {
			lead = l
		} else if l != lead {
			agreed = false
		}
		running++
	}
	if running == 0 || !agreed || lead == 0 {
		return nil, strings.Join(state, ", ")
	}
	for _, m := range c.members {
		if m.id == lead && m.e.Load() != nil {
			return m, ""
		}
	}
	return nil, strings.Join(state, ", ")
}

// TransferLeader moves the leadership to the running member to, and
// returns once every running member reports it as leader ([Cluster.Leader]).
// It does nothing if to is the leader already. It returns [ErrNotRunning]
// if to is not running, and an error if ctx is done first.
func (c *Cluster) TransferLeader(ctx context.Context, to *Member) error {
	if to.c != c {
		return errors.New("etcdtest: transfer leader: member of another cluster")
	}
	if to.e.Load() == nil {
		return fmt.Errorf("etcdtest: transfer leader to %s: %w", to.name, ErrNotRunning)
	}
	lead, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	if lead == to {
		return nil
	}
	e := lead.e.Load()
	if e == nil {
		return fmt.Errorf("etcdtest: transfer leader from %s: %w", lead.name, ErrNotRunning)
	}
	if err := e.Server.MoveLeader(ctx, lead.id, to.id); err != nil {
		return fmt.Errorf("etcdtest: transfer leader from %s to %s: %w", lead.name, to.name, err)
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		lead, err := c.Leader(ctx)
		if err != nil {
			return err
		}
		if lead == to {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: transfer leader to %s: leader is %s: %w", to.name, lead.name, ctx.Err())
		case <-t.C:
		}
	}
}

// Stop stops every member at once, without leadership transfers, closes the
// proxies, and removes the data directories (see [NewCluster]). It returns
// once all of the members' goroutines have ended. Stop is idempotent:
// calls after the first do nothing and return nil. After Stop,
// [Member.Restart] returns [ErrStopped].
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	c.mu.Unlock()
	// Members are locked in order: a Restart under way finishes first.
	for _, m := range c.members {
		m.ops.Lock()
		defer m.ops.Unlock()
	}
	var err error
	for _, m := range c.members {
		err = errors.Join(err, m.proxy.Close())
	}
	c.stopAll()
	for _, m := range c.members {
		m.releasePorts()
	}
	if rerr := c.removeDirs(); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("etcdtest: stop: %w", err)
	}
	return nil
}

func (c *Cluster) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// freePorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// isAddrInUse reports whether err is the failure to listen on a port that
// is taken.
func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) ||
		strings.Contains(strings.ToLower(err.Error()), "address already in use")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
