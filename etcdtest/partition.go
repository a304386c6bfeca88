package etcdtest

import "go.etcd.io/etcd/client/pkg/v3/types"

// Isolate cuts the Raft traffic between the running member m and every
// other running member, both ways, as a network partition would: m can
// no longer reach a quorum (a leader steps down after an election
// timeout), while its clients still reach it. Heal undoes it. Neither
// touches the proxies, which stand between clients and members.
func (c *Cluster) Isolate(m *Member) error { return c.cut(m, true) }

// Heal restores the Raft traffic that Isolate cut.
func (c *Cluster) Heal(m *Member) error { return c.cut(m, false) }

func (c *Cluster) cut(m *Member, cut bool) error {
	e := m.Etcd()
	if e == nil {
		return ErrNotRunning
	}
	for _, o := range c.Members() {
		oe := o.Etcd()
		if o == m || oe == nil {
			continue
		}
		if cut {
			e.Server.CutPeer(types.ID(o.ID()))
			oe.Server.CutPeer(types.ID(m.ID()))
		} else {
			e.Server.MendPeer(types.ID(o.ID()))
			oe.Server.MendPeer(types.ID(m.ID()))
		}
	}
	return nil
}
