package etcdtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/etcdtest"
)

// ctxT returns a context that ends after d or with the test.
func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually calls f every 10 ms until it returns nil, and fails the test
// with f's last error if that does not happen within d.
func eventually(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		<-tick.C
	}
}

func put(t *testing.T, cli *clientv3.Client, key, val string) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	if _, err := cli.Put(ctx, key, val); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// get reads key, serializably (from the member's own store) if local.
func get(ctx context.Context, cli *clientv3.Client, key string, local bool) (string, error) {
	var opts []clientv3.OpOption
	if local {
		opts = append(opts, clientv3.WithSerializable())
	}
	resp, err := cli.Get(ctx, key, opts...)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", errors.New("no such key")
	}
	return string(resp.Kvs[0].Value), nil
}

func wantGet(t *testing.T, cli *clientv3.Client, key, want string, local bool) {
	t.Helper()
	got, err := get(ctxT(t, 10*time.Second), cli, key, local)
	if err != nil || got != want {
		t.Fatalf("get %s = %q, %v; want %q", key, got, err, want)
	}
}

func others(c *etcdtest.Cluster, m *etcdtest.Member) []*etcdtest.Member {
	return slices.DeleteFunc(c.Members(), func(o *etcdtest.Member) bool { return o == m })
}

// refused reports whether a connection to the host of endpoint is refused.
func refused(t *testing.T, endpoint string) bool {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err == nil {
		_ = c.Close()
		return false
	}
	return true
}

func TestSingleMember(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	ms := cl.Members()
	if len(ms) != 1 {
		t.Fatalf("Members() has %d members, want 1", len(ms))
	}
	m := ms[0]
	if got, want := cl.Endpoints(), []string{m.Endpoint()}; !slices.Equal(got, want) {
		t.Errorf("Endpoints() = %v, want %v", got, want)
	}
	if m.Name() != "m0" || m.ID() == 0 || !m.Running() || m.Etcd() == nil {
		t.Errorf("member: name %q, ID %x, running %v", m.Name(), m.ID(), m.Running())
	}
	if fi, err := os.Stat(m.Dir()); err != nil || !fi.IsDir() {
		t.Errorf("data directory %s: %v", m.Dir(), err)
	}

	cli := cl.Client(t)
	put(t, cli, "k", "v1")
	wantGet(t, cli, "k", "v1", false)

	lead, err := cl.Leader(ctxT(t, 10*time.Second))
	if err != nil || lead != m {
		t.Fatalf("Leader() = %v, %v; want the only member", lead, err)
	}
	resp, err := cli.MemberList(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 1 || resp.Members[0].ID != m.ID() ||
		!slices.Equal(resp.Members[0].ClientURLs, []string{m.Endpoint()}) ||
		!slices.Equal(resp.Members[0].PeerURLs, []string{m.PeerURL()}) {
		t.Errorf("MemberList = %v, want member %x at %s, %s", resp.Members, m.ID(), m.Endpoint(), m.PeerURL())
	}
}

func TestMemberStopRestartKeepsData(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	m := cl.Members()[0]
	put(t, m.Client(t), "k", "kept")

	m.Stop()
	m.Stop() // idempotent
	if m.Running() || m.Etcd() != nil {
		t.Fatal("member running after Stop")
	}
	if !refused(t, m.Endpoint()) {
		t.Fatal("stopped member's client port accepts connections")
	}
	if _, err := cl.Leader(ctxT(t, 100*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Leader() with no member running: %v, want a deadline error", err)
	}

	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	// A fresh client: the old one's connection was to the stopped server.
	wantGet(t, m.Client(t), "k", "kept", false)
}

func TestNewClusterOwnDirectory(t *testing.T) {
	cl, err := etcdtest.NewCluster(1, "")
	if err != nil {
		t.Fatal(err)
	}
	m := cl.Members()[0]
	dir := m.Dir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("data directory: %v", err)
	}
	if err := cl.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := cl.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory after Stop: %v, want it removed", err)
	}
	if err := m.Restart(); !errors.Is(err, etcdtest.ErrStopped) {
		t.Errorf("Restart after Stop: %v, want ErrStopped", err)
	}
	if !refused(t, m.Endpoint()) {
		t.Error("client port accepts connections after Stop")
	}
}

func TestNewClusterErrors(t *testing.T) {
	if _, err := etcdtest.NewCluster(0, ""); err == nil {
		t.Error("NewCluster(0) succeeded")
	}
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/m0", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdtest.NewCluster(1, dir); err == nil {
		t.Error("NewCluster over an existing data directory succeeded")
	}
}

func TestThreeMembersLeaderKilled(t *testing.T) {
	cl := etcdtest.Start(t, 3)
	if n := len(cl.Members()); n != 3 {
		t.Fatalf("Members() has %d members, want 3", n)
	}
	put(t, cl.Client(t), "before", "1")

	old, err := cl.Leader(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Each member's own view agrees.
	for _, m := range cl.Members() {
		st, err := m.Client(t).Status(ctxT(t, 10*time.Second), m.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader != old.ID() {
			t.Errorf("%s reports leader %x, Leader() = %s (%x)", m.Name(), st.Leader, old.Name(), old.ID())
		}
	}

	start := time.Now()
	old.Kill()
	if !refused(t, old.Endpoint()) || !refused(t, old.PeerURL()) {
		t.Fatal("killed member's ports accept connections")
	}
	lead, err := cl.Leader(ctxT(t, 20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if lead == old {
		t.Fatal("Leader() returned the killed member")
	}
	t.Logf("new leader %s after %v", lead.Name(), time.Since(start))
	rest := others(cl, old)
	put(t, lead.Client(t), "during", "2")
	for _, m := range rest {
		cli := m.Client(t)
		eventually(t, 10*time.Second, m.Name()+" has the write", func() error {
			_, err := get(ctxT(t, time.Second), cli, "during", true)
			return err
		})
	}

	if err := old.Restart(); err != nil {
		t.Fatal(err)
	}
	oc := old.Client(t)
	// Its own data survived: served from its store, before catching up.
	wantGet(t, oc, "before", "1", true)
	// It rejoins and catches up with the write it missed.
	eventually(t, 10*time.Second, "restarted member has the missed write", func() error {
		_, err := get(ctxT(t, time.Second), oc, "during", true)
		return err
	})
	if _, err := cl.Leader(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("no agreed leader with the restarted member: %v", err)
	}
	resp, err := oc.MemberList(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 3 {
		t.Fatalf("MemberList has %d members, want 3", len(resp.Members))
	}
	// A linearizable write and read through the restarted member.
	put(t, oc, "after", "3")
	wantGet(t, oc, "after", "3", false)
}

func TestTransferLeader(t *testing.T) {
	cl := etcdtest.Start(t, 3)
	ctx := ctxT(t, 30*time.Second)
	lead, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.TransferLeader(ctx, lead); err != nil {
		t.Fatalf("TransferLeader to the leader: %v", err)
	}
	to := others(cl, lead)[0]
	if err := cl.TransferLeader(ctx, to); err != nil {
		t.Fatal(err)
	}
	if got, err := cl.Leader(ctx); err != nil || got != to {
		t.Fatalf("Leader() after transfer = %v, %v; want %s", got, err, to.Name())
	}
	st, err := lead.Client(t).Status(ctx, lead.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader != to.ID() {
		t.Errorf("old leader reports leader %x, want %x", st.Leader, to.ID())
	}

	// A graceful Stop of the leader hands leadership over.
	to.Stop()
	next, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == to {
		t.Fatal("Leader() returned the stopped member")
	}
	if err := cl.TransferLeader(ctx, to); !errors.Is(err, etcdtest.ErrNotRunning) {
		t.Errorf("TransferLeader to a stopped member: %v, want ErrNotRunning", err)
	}
	if err := to.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := cl.TransferLeader(ctx, to); err != nil {
		t.Fatalf("TransferLeader to the restarted member: %v", err)
	}
	put(t, to.Client(t), "k", "v")
}

func TestWholeClusterRestart(t *testing.T) {
	cl := etcdtest.Start(t, 3)
	put(t, cl.Client(t), "k", "v")
	for _, m := range cl.Members() {
		m.Kill()
	}
	ms := cl.Members()
	// Alone, m0 has no quorum: Restart returns without waiting for it.
	if err := ms[0].Restart(); err != nil {
		t.Fatal(err)
	}
	if !ms[0].Running() {
		t.Fatal("m0 not running after Restart")
	}
	if err := ms[1].Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Leader(ctxT(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	wantGet(t, ms[0].Client(t), "k", "v", false)
	wantGet(t, ms[1].Client(t), "k", "v", false)
}

func TestProxyPausesClient(t *testing.T) {
	cl := etcdtest.Start(t, 1)
	m := cl.Members()[0]
	if m.ProxyEndpoint() == m.Endpoint() {
		t.Fatalf("ProxyEndpoint() = Endpoint() = %s", m.Endpoint())
	}
	if got, want := cl.ProxyEndpoints(), []string{m.ProxyEndpoint()}; !slices.Equal(got, want) {
		t.Errorf("ProxyEndpoints() = %v, want %v", got, want)
	}
	cli := etcdtest.Dial(t, m.ProxyEndpoint())
	put(t, cli, "k", "v")

	m.Proxy().Pause()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	start := time.Now()
	_, err := cli.Get(ctx, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get through a paused proxy: %v, want a deadline error", err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("Get through a paused proxy failed after %v, before its timeout", d)
	}
	// The member itself is fine.
	wantGet(t, m.Client(t), "k", "v", false)

	m.Proxy().Resume()
	wantGet(t, cli, "k", "v", false)

	// Cut drops the connection; the client reconnects through the proxy.
	m.Proxy().Cut()
	eventually(t, 10*time.Second, "get after Cut", func() error {
		_, err := get(ctxT(t, time.Second), cli, "k", false)
		return err
	})
	if n := m.Proxy().Conns(); n == 0 {
		t.Error("Conns() = 0 after the client reconnected")
	}

	// Stopping the member cuts the proxied connections, and new ones are
	// closed at once, as the member's port refuses them (the client's
	// reconnection may be counted for that instant).
	m.Stop()
	eventually(t, 10*time.Second, "no connection through the proxy of a stopped member", func() error {
		if n := m.Proxy().Conns(); n != 0 {
			return fmt.Errorf("Conns() = %d", n)
		}
		return nil
	})
	ctx, cancel = context.WithTimeout(t.Context(), time.Second)
	_, err = cli.Get(ctx, "k")
	cancel()
	if err == nil {
		t.Fatal("Get through the proxy of a stopped member succeeded")
	}
	if n := m.Proxy().Conns(); n != 0 {
		t.Errorf("Conns() = %d while the member is stopped, want 0", n)
	}
}

// TestIsolate: an isolated member cannot serve a linearizable read (it
// has no quorum), while the other two elect a leader among themselves and
// serve writes; healed, it catches up.
func TestIsolate(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ms := c.Members()
	alone := ms[0]
	if err := c.Isolate(alone); err != nil {
		t.Fatal(err)
	}
	majority := etcdtest.Dial(t, ms[1].Endpoint(), ms[2].Endpoint())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A write proposed before the majority has a leader of its own times
	// out on the server (the isolated leader, if it was one, never
	// commits it): it is tried again, as an application would.
	for {
		_, err := majority.Put(ctx, "k", "v")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Put on the majority side: %v", err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := alone.Client(t).Get(short, "k"); err == nil {
		t.Fatal("the isolated member served a linearizable read")
	}
	if err := c.Heal(alone); err != nil {
		t.Fatal(err)
	}
	cli := alone.Client(t)
	for {
		r, err := cli.Get(ctx, "k")
		if err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Value) == "v" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the healed member never caught up: %v, %v", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
