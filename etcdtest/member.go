package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/distlock/distlock/internal/porthold"
)

// A Member is one etcd member of a [Cluster]. Its name, ID, ports, data
// directory and proxy stay the same for the cluster's lifetime, across
// [Member.Stop] and [Member.Restart].
//
// A Member is safe for concurrent use by multiple goroutines.
type Member struct {
	c              *Cluster
	name           string
	dir            string
	clientPort     int
	peerPort       int
	initialCluster string
	id             uint64
	proxy          *Proxy

	ops    sync.Mutex                 // serializes Stop, Kill, Restart and Cluster.Stop
	e      atomic.Pointer[embed.Etcd] // the running server, nil while stopped
	unhold []func()                   // give back the ports held while stopped
}

// Name returns the member's name: m0, m1, ….
func (m *Member) Name() string { return m.name }

// ID returns the member's Raft ID, as reported by etcd (for example in
// MemberList responses and as the leader in Status responses).
func (m *Member) ID() uint64 { return m.id }

// Dir returns the member's data directory.
func (m *Member) Dir() string { return m.dir }

// Endpoint returns the member's client URL, "http://127.0.0.1:PORT".
func (m *Member) Endpoint() string { return "http://" + m.clientAddr() }

// PeerURL returns the member's peer URL, "http://127.0.0.1:PORT".
func (m *Member) PeerURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.peerPort))
}

// ProxyEndpoint returns the URL of the member's [Proxy],
// "http://127.0.0.1:PORT": clients given it reach the member through the
// proxy, which can pause and cut their connections.
func (m *Member) ProxyEndpoint() string { return "http://" + m.proxy.Addr() }

// Proxy returns the proxy in front of the member's client port. It is
// closed by [Cluster.Stop].
func (m *Member) Proxy() *Proxy { return m.proxy }

// Running reports whether the member is running: started, and not stopped
// or killed since.
func (m *Member) Running() bool { return m.e.Load() != nil }

// Etcd returns the member's embedded server, or nil while it is stopped.
// It is for inspecting the server's state; stop the member with
// [Member.Stop] or [Member.Kill], not by closing the server.
func (m *Member) Etcd() *embed.Etcd { return m.e.Load() }

// Client returns a client for this member only, as [Dial] does.
func (m *Member) Client(tb TB) *clientv3.Client {
	tb.Helper()
	return Dial(tb, m.Endpoint())
}

// Stop shuts the member down gracefully, as etcd does on SIGTERM: a leader
// first hands its leadership over to another member, and requests under
// way may finish. The connections through its proxy are cut. Its data
// directory is kept, and its ports stay reserved (on Unix) until
// [Member.Restart], so that peers and clients get "connection refused".
// Stopping a stopped member does nothing.
//
// In a cluster of several members, Stop and [Member.Kill] often take about
// a second: etcd's peer server waits up to 1 s for connections whose
// handler has finished but whose background read is still pending.
func (m *Member) Stop() {
	m.ops.Lock()
	defer m.ops.Unlock()
	m.stop(false)
}

// Kill stops the member without telling the others, like a crash: a leader
// keeps its leadership until the others' election timeout expires. The
// connections through its proxy are cut, its data directory is kept and its
// ports stay reserved, as with [Member.Stop]. Killing a stopped member does
// nothing.
func (m *Member) Kill() {
	m.ops.Lock()
	defer m.ops.Unlock()
	m.stop(true)
}

func (m *Member) stop(hard bool) {
	e := m.e.Swap(nil)
	if e == nil {
		return
	}
	m.proxy.Cut()
	if hard {
		crash(e)
	} else {
		e.Close()
	}
	m.unhold = []func(){porthold.Hold(m.clientPort), porthold.Hold(m.peerPort)}
}

// crash stops e without coordination with the other members, then closes
// it.
func crash(e *embed.Etcd) {
	e.Server.HardStop()
	e.Close()
}

func (m *Member) releasePorts() {
	for _, f := range m.unhold {
		f()
	}
	m.unhold = nil
}

// Restart starts the member again, on the same ports and from the same
// data directory, so that it rejoins the cluster with its data and catches
// up with what it missed. A running member is killed first, as by
// [Member.Kill]. If the member and the other running members form a
// quorum, Restart returns once the member is ready to serve clients;
// otherwise it returns once the member is listening, and the member becomes
// ready when enough other members are restarted. If a port turns out to be
// taken, Restart tries again a few times. Restart returns [ErrStopped] after
// [Cluster.Stop].
func (m *Member) Restart() error {
	m.ops.Lock()
	defer m.ops.Unlock()
	if m.c.isStopped() {
		return fmt.Errorf("etcdtest: restart %s: %w", m.name, ErrStopped)
	}
	m.stop(true)
	m.releasePorts()
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = m.launch(); err == nil || !isAddrInUse(err) {
			break
		}
		// Another process took a port meanwhile: give it a moment.
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
	if err != nil {
		m.unhold = []func(){porthold.Hold(m.clientPort), porthold.Hold(m.peerPort)}
		return fmt.Errorf("etcdtest: restart %s: %w", m.name, err)
	}
	if !m.hasQuorum() {
		return nil
	}
	if err := awaitReady(m.e.Load()); err != nil {
		m.stop(true)
		return fmt.Errorf("etcdtest: restart %s: %w", m.name, err)
	}
	return nil
}

// hasQuorum reports whether the running members form a quorum.
func (m *Member) hasQuorum() bool {
	running := 0
	for _, o := range m.c.members {
		if o.e.Load() != nil {
			running++
		}
	}
	return running > len(m.c.members)/2
}

// launch starts the member's server; it does not wait for it to be ready.
func (m *Member) launch() error {
	e, err := embed.StartEtcd(m.config())
	if err != nil {
		return err
	}
	m.e.Store(e)
	return nil
}

// config returns the member's server configuration. A new one is made for
// each start, since the server keeps and modifies the one it is given.
func (m *Member) config() *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	client := url.URL{Scheme: "http", Host: m.clientAddr()}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(m.peerPort))}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	// On a restart the data directory holds the membership, and etcd
	// ignores these two.
	cfg.InitialCluster = m.initialCluster
	cfg.InitialClusterToken = m.c.token
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.UnsafeNoFsync = true
	cfg.TickMs = uint(HeartbeatInterval / time.Millisecond)
	cfg.ElectionMs = uint(ElectionTimeout / time.Millisecond)
	cfg.EnableGRPCGateway = false
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	return cfg
}

func (m *Member) clientAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.clientPort))
}

// awaitReady waits until e is ready to serve clients, fails, or
// readyTimeout passes.
func awaitReady(e *embed.Etcd) error {
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err, ok := <-e.Err():
		if !ok {
			err = errors.New("server closed")
		}
		return fmt.Errorf("not ready: %w", err)
	case <-t.C:
		return fmt.Errorf("not ready after %v", readyTimeout)
	}
}
