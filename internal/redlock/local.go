package redlock

import (
	"sync"

	"github.com/distlock/distlock/store"
)

// localWatchers are the wake functions of this Backend's watches, by lock
// name.
//
// No node tells a client of its own releases: the Client hands a release
// over to its own waiters when the call that made it returns (see
// store.Store.Watch). But this Backend also frees the lock on a node
// after that, or in calls that the Client does not take for releases: a
// node's late reply to a release (the outcome was decided by a quorum
// before it), the undoing of an attempt that did not reach a quorum, an
// abandonment. A waiter of this process that found such a node taken
// (say by the attempt being undone, or by a release still on its way) and
// so could not reach a quorum would then hear of nothing, and sleep until
// the lease it saw there ran out. freed tells this process's watchers of
// the name instead, as a release notice.
type localWatchers struct {
	mu     sync.Mutex
	byName map[string][]*watcher
}

type watcher struct{ wake func(store.Notice) }

// add registers wake for the releases of name, until remove is called.
func (l *localWatchers) add(name string, wake func(store.Notice)) (remove func()) {
	w := &watcher{wake}
	l.mu.Lock()
	if l.byName == nil {
		l.byName = map[string][]*watcher{}
	}
	l.byName[name] = append(l.byName[name], w)
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		ws := l.byName[name]
		for i, x := range ws {
			if x == w {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(l.byName, name)
		} else {
			l.byName[name] = ws
		}
	}
}

// freed tells the watchers of name that this Backend freed the lock on a
// node.
func (l *localWatchers) freed(name string) {
	l.mu.Lock()
	ws := append([]*watcher(nil), l.byName[name]...)
	l.mu.Unlock()
	for _, w := range ws {
		w.wake(store.Notice{})
	}
}
