package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Cluster is a Redis Cluster of redis-server processes started by this
// package, with the 16384 slots split evenly between its masters and, with
// [WithReplicas], replicas of each master.
type Cluster struct {
	// Servers are the nodes started as masters, in slot order: Servers[0]
	// served the lowest slots at the start. Each can be killed, paused and
	// restarted like any Server (a restarted node comes back empty and
	// without its slots). After a failover or a slot migration, use
	// [Cluster.SlotMaster] to find who serves a slot.
	Servers []*Server
	// Replicas are the nodes started as replicas (with [WithReplicas]):
	// Replicas[i*r+j] is the j-th of the r replicas of Servers[i] at the
	// start. After a failover a replica may be a master.
	Replicas []*Server

	password string
}

// NewCluster starts n (at least 1) cluster-enabled masters and, with
// [WithReplicas], that many replicas of each, assigns the slots, joins
// them and returns once every node knows every other, every replica is
// connected to its master (master_link_status:up, no sync in progress),
// every node lists every replica with its master in CLUSTER SLOTS, and
// every node reports cluster_state:ok. The caller must call
// [Cluster.Stop]; tests should use [StartCluster].
//
// The servers' cluster bus ports are their ports + 10000. The cluster's
// node timeout is 5 s unless opts set --cluster-node-timeout (a shorter one,
// such as 1000 ms, makes the automatic failover after a master is killed
// take a few seconds). With replicas, full syncs start at once
// (repl-diskless-sync-delay 0), a replica may take over however long ago
// it last heard from its master (cluster-replica-validity-factor 0), and
// masters ping their replicas every second (repl-ping-replica-period 1:
// CLUSTER SLOTS leaves out a replica until its replication offset is above
// zero, which on an empty master takes the first ping, 10 s by default).
func NewCluster(n int, opts ...Option) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("redistest: a cluster needs at least one node")
	}
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.replicas < 0 {
		return nil, errors.New("redistest: a negative number of replicas")
	}
	c := &Cluster{password: cfg.password}
	base := []Option{WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000")}
	if cfg.replicas > 0 {
		base = append(base, WithArgs("--repl-diskless-sync-delay", "0",
			"--cluster-replica-validity-factor", "0", "--repl-ping-replica-period", "1"))
	}
	opts = append(base, opts...) // later arguments win
	for i := 0; i < n*(1+cfg.replicas); i++ {
		s, err := NewServer(opts...)
		if err != nil {
			return nil, errors.Join(err, c.Stop())
		}
		if i < n {
			c.Servers = append(c.Servers, s)
		} else {
			c.Replicas = append(c.Replicas, s)
		}
	}
	if err := c.join(cfg.replicas); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// StartCluster starts a cluster as [NewCluster] does for the test tb,
// and stops it when the test ends.
func StartCluster(tb TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	c, err := NewCluster(n, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("redistest: stop cluster: %v", err)
		}
	})
	return c
}

// clusterTimeout bounds the set-up of a cluster and each of the waits of
// the Cluster's methods that have no context of their caller's.
const clusterTimeout = 30 * time.Second

func (c *Cluster) join(replicas int) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	per := 16384 / len(c.Servers)
	all := c.Nodes()
	for i, s := range all {
		rdb := c.nodeClient(s)
		var err error
		if i < len(c.Servers) {
			lo, hi := i*per, (i+1)*per-1
			if i == len(c.Servers)-1 {
				hi = 16383
			}
			err = rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
		}
		if err == nil && i > 0 {
			err = rdb.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.Servers[0].Port())).Err()
		}
		rdb.Close()
		if err != nil {
			return fmt.Errorf("redistest: cluster set-up of %s: %w", s.Addr(), err)
		}
	}
	// Wait for the gossip to converge: every node must know every other
	// (a replica can only follow a master it knows).
	if err := c.await(ctx, func(s *Server, rdb *redis.Client) string {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", len(all))) {
			return "not every node known"
		}
		return ""
	}); err != nil {
		return err
	}
	for i, s := range c.Replicas {
		master := c.Servers[i/replicas]
		id, err := c.nodeID(ctx, master)
		if err == nil {
			rdb := c.nodeClient(s)
			err = rdb.Do(ctx, "CLUSTER", "REPLICATE", id).Err()
			rdb.Close()
		}
		if err != nil {
			return fmt.Errorf("redistest: make %s a replica of %s: %w", s.Addr(), master.Addr(), err)
		}
	}
	return c.await(ctx, func(s *Server, rdb *redis.Client) string {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return "cluster_state not ok"
		}
		if slices.Contains(c.Replicas, s) {
			st, err := infoReplication(ctx, s)
			if err != nil {
				return err.Error()
			}
			if st["master_link_status"] != "up" || st["master_sync_in_progress"] != "0" {
				return fmt.Sprintf("replica: master_link_status=%s master_sync_in_progress=%s",
					st["master_link_status"], st["master_sync_in_progress"])
			}
		}
		slots, err := rdb.ClusterSlots(ctx).Result()
		if err != nil {
			return err.Error()
		}
		for _, r := range slots {
			if len(r.Nodes) != 1+replicas {
				return fmt.Sprintf("slots %d-%d: %d nodes listed, want %d", r.Start, r.End, len(r.Nodes), 1+replicas)
			}
		}
		return ""
	})
}

// await polls every running node until check, given the node and a client
// for it, returns "" for each, or ctx ends; the error names the last
// complaint. A node that does not answer does not pass.
func (c *Cluster) await(ctx context.Context, check func(*Server, *redis.Client) string) error {
	for _, s := range c.Nodes() {
		if s.PID() == 0 {
			continue
		}
		rdb := c.nodeClient(s)
		last := ""
		err := waitFor(ctx, func() bool {
			last = check(s, rdb)
			return last == ""
		})
		rdb.Close()
		if err != nil {
			return fmt.Errorf("redistest: cluster node %s: %s: %w", s.Addr(), last, err)
		}
	}
	return nil
}

// nodeClient returns a client for one node that gives up after a second,
// so that a paused node does not hold up the caller.
func (c *Cluster) nodeClient(s *Server) *redis.Client {
	opt := s.Options()
	opt.MaxRetries = -1
	opt.ReadTimeout = time.Second
	return redis.NewClient(opt)
}

// nodeID returns s's cluster node id (CLUSTER MYID).
func (c *Cluster) nodeID(ctx context.Context, s *Server) (string, error) {
	rdb := c.nodeClient(s)
	defer rdb.Close()
	id, err := rdb.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return "", fmt.Errorf("redistest: CLUSTER MYID at %s: %w", s.Addr(), err)
	}
	return id, nil
}

// Nodes returns every node of the cluster: the masters, then the replicas,
// as they were started (see [Cluster.Servers] and [Cluster.Replicas]).
func (c *Cluster) Nodes() []*Server {
	return append(append([]*Server(nil), c.Servers...), c.Replicas...)
}

// byAddr returns the cluster's node at addr.
func (c *Cluster) byAddr(addr string) (*Server, error) {
	for _, s := range c.Nodes() {
		if s.Addr() == addr {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redistest: %s is not a node of this cluster", addr)
}

// SlotMaster returns the master of slot as the running nodes see it
// (CLUSTER SLOTS): every node that answers must name the same node, or
// SlotMaster returns an error (as it does while gossip spreads a failover
// or a migration). Nodes that do not answer are skipped; at least one must
// answer.
func (c *Cluster) SlotMaster(ctx context.Context, slot int) (*Server, error) {
	addr := ""
	for _, s := range c.Nodes() {
		if s.PID() == 0 {
			continue
		}
		rdb := c.nodeClient(s)
		ranges, err := rdb.ClusterSlots(ctx).Result()
		rdb.Close()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		got := ""
		for _, r := range ranges {
			if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 {
				got = r.Nodes[0].Addr
			}
		}
		if got == "" {
			return nil, fmt.Errorf("redistest: %s knows no master of slot %d", s.Addr(), slot)
		}
		if addr != "" && got != addr {
			return nil, fmt.Errorf("redistest: nodes disagree on the master of slot %d: %s and %s", slot, addr, got)
		}
		addr = got
	}
	if addr == "" {
		return nil, errors.New("redistest: no cluster node answered")
	}
	return c.byAddr(addr)
}

// SlotReplica returns a replica of the master of slot (see
// [Cluster.SlotMaster]): a running node that reports itself a replica of
// that master (INFO replication), whether or not its link is up.
func (c *Cluster) SlotReplica(ctx context.Context, slot int) (*Server, error) {
	m, err := c.SlotMaster(ctx, slot)
	if err != nil {
		return nil, err
	}
	return c.replicaOf(ctx, m)
}

func (c *Cluster) replicaOf(ctx context.Context, m *Server) (*Server, error) {
	for _, s := range c.Nodes() {
		if s == m || s.PID() == 0 {
			continue
		}
		st, err := infoReplication(ctx, s)
		if err == nil && st["role"] == "slave" && st["master_port"] == strconv.Itoa(m.Port()) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redistest: no running replica of %s", m.Addr())
}

// AwaitSlotMaster waits until every running node names, for slot, a master
// other than old (for example a master just killed, or one whose replica
// was told to take over), that master reports role:master, and every
// running node reports cluster_state:ok; it returns the new master. With
// old nil any agreed master will do. It returns an error wrapping ctx's if
// that does not happen before ctx ends.
func (c *Cluster) AwaitSlotMaster(ctx context.Context, slot int, old *Server) (*Server, error) {
	var m *Server
	var last error
	err := waitFor(ctx, func() bool {
		got, err := c.SlotMaster(ctx, slot)
		if err != nil {
			if ctx.Err() == nil {
				last = err // the end of ctx would hide why the nodes had not agreed
			}
			return false
		}
		m = got
		if m == old {
			last = fmt.Errorf("slot %d still served by %s", slot, old.Addr())
			return false
		}
		st, err := infoReplication(ctx, m)
		if err != nil || st["role"] != "master" {
			if ctx.Err() == nil {
				last = fmt.Errorf("%s reports role %q (%v)", m.Addr(), st["role"], err)
			}
			return false
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("redistest: no new master of slot %d: %v: %w", slot, last, err)
	}
	if err := c.awaitOK(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// awaitOK waits until every running node reports cluster_state:ok.
func (c *Cluster) awaitOK(ctx context.Context) error {
	return c.await(ctx, func(_ *Server, rdb *redis.Client) string {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return "cluster_state not ok"
		}
		return ""
	})
}

// FailoverReplica makes a replica of master take over its slots with a
// planned failover (CLUSTER FAILOVER sent to the replica: the master stops
// taking writes until the replica has caught up, then the replica is
// promoted), and returns the replica once every running node names it as
// the master of master's slots, it reports role:master, master reports
// role:slave, and every running node reports cluster_state:ok.
func (c *Cluster) FailoverReplica(ctx context.Context, master *Server) (*Server, error) {
	slot, err := c.slotOf(ctx, master)
	if err != nil {
		return nil, err
	}
	r, err := c.replicaOf(ctx, master)
	if err != nil {
		return nil, err
	}
	rdb := c.nodeClient(r)
	err = rdb.Do(ctx, "CLUSTER", "FAILOVER").Err()
	rdb.Close()
	if err != nil {
		return nil, fmt.Errorf("redistest: CLUSTER FAILOVER at %s: %w", r.Addr(), err)
	}
	m, err := c.AwaitSlotMaster(ctx, slot, master)
	if err != nil {
		return nil, err
	}
	if m != r {
		return nil, fmt.Errorf("redistest: slot %d went to %s, not to the replica %s", slot, m.Addr(), r.Addr())
	}
	var last string
	if err := waitFor(ctx, func() bool {
		st, err := infoReplication(ctx, master)
		if err != nil {
			last = err.Error()
			return false
		}
		last = "role " + st["role"]
		return st["role"] == "slave"
	}); err != nil {
		return nil, fmt.Errorf("redistest: the old master %s did not become a replica (%s): %w", master.Addr(), last, err)
	}
	return r, nil
}

// slotOf returns the lowest slot that master serves, as the first node
// that answers sees it.
func (c *Cluster) slotOf(ctx context.Context, master *Server) (int, error) {
	for _, s := range c.Nodes() {
		if s.PID() == 0 {
			continue
		}
		rdb := c.nodeClient(s)
		ranges, err := rdb.ClusterSlots(ctx).Result()
		rdb.Close()
		if err != nil {
			continue
		}
		for _, r := range ranges {
			if len(r.Nodes) > 0 && r.Nodes[0].Addr == master.Addr() {
				return r.Start, nil
			}
		}
		return 0, fmt.Errorf("redistest: %s serves no slot", master.Addr())
	}
	return 0, errors.New("redistest: no cluster node answered")
}

// A Migration is a slot being moved from one master to another, begun by
// [Cluster.StartMigration]. While it is under way the source answers ASK
// for the slot's keys it no longer holds, the target serves them to
// clients that send ASKING first, and multi-key commands whose keys are
// split between the two get TRYAGAIN.
type Migration struct {
	c            *Cluster
	slot         int
	from, to     *Server
	fromID, toID string
}

// migrateBatch is how many keys one MIGRATE moves.
const migrateBatch = 100

// StartMigration begins moving slot from its master (see
// [Cluster.SlotMaster]) to the master to: CLUSTER SETSLOT slot IMPORTING on
// to, then MIGRATING on the source. No key is moved yet: call
// [Migration.MoveKeys] and [Migration.Finish], or use [Cluster.MigrateSlot]
// for the whole dance.
func (c *Cluster) StartMigration(ctx context.Context, slot int, to *Server) (*Migration, error) {
	from, err := c.SlotMaster(ctx, slot)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("redistest: slot %d is already served by %s", slot, to.Addr())
	}
	m := &Migration{c: c, slot: slot, from: from, to: to}
	if m.fromID, err = c.nodeID(ctx, from); err != nil {
		return nil, err
	}
	if m.toID, err = c.nodeID(ctx, to); err != nil {
		return nil, err
	}
	if err := m.setSlot(ctx, to, "IMPORTING", m.fromID); err != nil {
		return nil, err
	}
	if err := m.setSlot(ctx, from, "MIGRATING", m.toID); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Migration) setSlot(ctx context.Context, s *Server, args ...any) error {
	rdb := m.c.nodeClient(s)
	defer rdb.Close()
	err := rdb.Do(ctx, append([]any{"CLUSTER", "SETSLOT", m.slot}, args...)...).Err()
	if err != nil {
		return fmt.Errorf("redistest: CLUSTER SETSLOT %d %v at %s: %w", m.slot, args, s.Addr(), err)
	}
	return nil
}

// From returns the master the slot is moving from.
func (m *Migration) From() *Server { return m.from }

// To returns the master the slot is moving to.
func (m *Migration) To() *Server { return m.to }

// MoveKeys moves every key of the slot still on the source to the target,
// in batches of 100 keys (CLUSTER GETKEYSINSLOT, then MIGRATE ... KEYS),
// until the source holds none. The slot stays in migration: the source
// answers ASK for every key of it.
func (m *Migration) MoveKeys(ctx context.Context) error {
	rdb := m.c.nodeClient(m.from)
	defer rdb.Close()
	for {
		keys, err := rdb.ClusterGetKeysInSlot(ctx, m.slot, migrateBatch).Result()
		if err != nil {
			return fmt.Errorf("redistest: CLUSTER GETKEYSINSLOT %d at %s: %w", m.slot, m.from.Addr(), err)
		}
		if len(keys) == 0 {
			return nil
		}
		args := []any{"MIGRATE", "127.0.0.1", m.to.Port(), "", 0, 5000}
		if m.c.password != "" {
			args = append(args, "AUTH", m.c.password)
		}
		args = append(args, "KEYS")
		for _, k := range keys {
			args = append(args, k)
		}
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("redistest: MIGRATE from %s to %s: %w", m.from.Addr(), m.to.Addr(), err)
		}
	}
}

// Finish moves any key left (as [Migration.MoveKeys] does), assigns the
// slot to the target (CLUSTER SETSLOT slot NODE, on the target, the source
// and every other running master) and returns once every running node
// names the target as the slot's master and reports cluster_state:ok.
func (m *Migration) Finish(ctx context.Context) error {
	if err := m.MoveKeys(ctx); err != nil {
		return err
	}
	if err := m.setSlot(ctx, m.to, "NODE", m.toID); err != nil {
		return err
	}
	if err := m.setSlot(ctx, m.from, "NODE", m.toID); err != nil {
		return err
	}
	for _, s := range m.c.Nodes() {
		if s == m.to || s == m.from || s.PID() == 0 {
			continue
		}
		// A master that does not answer at once (a loaded machine) is
		// asked again: skipped, it would be left to learn the slot's new
		// master from gossip alone.
		var role string
		if err := waitFor(ctx, func() bool {
			st, err := infoReplication(ctx, s)
			role = st["role"]
			return err == nil
		}); err != nil {
			return fmt.Errorf("redistest: the role of %s: %w", s.Addr(), err)
		}
		if role != "master" {
			continue
		}
		if err := m.setSlot(ctx, s, "NODE", m.toID); err != nil {
			return err
		}
	}
	got, err := m.c.AwaitSlotMaster(ctx, m.slot, nil)
	if err != nil {
		return err
	}
	if got != m.to {
		return fmt.Errorf("redistest: slot %d served by %s after its migration to %s", m.slot, got.Addr(), m.to.Addr())
	}
	return nil
}

// MigrateSlot moves slot from its master to the master to, keys and all:
// [Cluster.StartMigration], [Migration.MoveKeys] and [Migration.Finish].
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to *Server) error {
	m, err := c.StartMigration(ctx, slot, to)
	if err != nil {
		return err
	}
	return m.Finish(ctx)
}

// infoReplication returns s's INFO replication as a map.
func infoReplication(ctx context.Context, s *Server) (map[string]string, error) {
	opt := s.Options()
	opt.MaxRetries = -1
	opt.ReadTimeout = time.Second
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	text, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(text) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok {
			out[k] = v
		}
	}
	return out, nil
}

// waitFor polls cond every 20 ms until it holds or ctx ends; there is no
// event for a cluster's gossip converging.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Addrs returns the addresses of every node, masters first.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Nodes() {
		out = append(out, s.Addr())
	}
	return out
}

// Client returns a new go-redis cluster client, closed when tb ends.
func (c *Cluster) Client(tb TB) *redis.ClusterClient {
	tb.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Password: c.password})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Stop stops every node; it is idempotent.
func (c *Cluster) Stop() error {
	var errs []error
	for _, s := range c.Nodes() {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}
