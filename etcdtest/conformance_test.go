package etcdtest_test

import (
	"testing"

	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/store"
	"github.com/distlock/distlock/store/storetest"
)

// The store conformance suite on etcdstore, on one member and on three
// (each client on its own member, so that requests cross the cluster).

func TestConformanceOneMember(t *testing.T) {
	c := etcdtest.Start(t, 1)
	storetest.Run(t, func(t *testing.T) store.Store { return etcdstore.New(c.Client(t)) })
}

func TestConformanceThreeMembers(t *testing.T) {
	c := etcdtest.Start(t, 3)
	next := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		m := c.Members()[next%3]
		next++
		return etcdstore.New(m.Client(t))
	})
}
