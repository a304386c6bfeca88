package etcdstore

import (
	"strings"

	"github.com/distlock/distlock/store"
)

// Keys. P is the store's prefix (DefaultPrefix by default). A lock name
// cannot contain braces, so {name} delimits it exactly.
//
//	P lock/{name}/<t>/<id>.<n>  one key per acquisition: the owner's hold,
//	                            or its place in the queue (t: the kind; id
//	                            the store's, n a slot of it: slots.go)
//	P line/{name}/<id>          the store's key in the line of a plain
//	                            mutex, while it waits for it (line.go)
//	P mark/<owner>/<name>       the abandonment mark of an owner
//	P revoked/<grantee>/<name>  a revocation notice (revoked.go)
//	P done/<name>               a Once record (once.go)
//
// Every key of one lock lies under its directory, P lock/{name}/, and the
// keys of its contenders are ordered by their create revisions: that
// order is the queue, and the first keys in it hold the lock (admit.go).

// letters is the letter of each kind in its keys: both sides of a
// read-write lock share one, so that a side changes without a new key.
var letters = map[store.Kind]byte{
	store.Plain: 'm', store.Fair: 'f', store.Election: 'e',
	store.Read: 'w', store.Write: 'w', store.Semaphore: 's',
}

// kindOf is the kind a letter stands for (Write for a read-write lock).
func kindOf(letter byte) store.Kind {
	switch letter {
	case 'f':
		return store.Fair
	case 'e':
		return store.Election
	case 'w':
		return store.Write
	case 's':
		return store.Semaphore
	}
	return store.Plain
}

func (s *Store) lockRoot() string           { return s.prefix + "lock/" }
func (s *Store) lockDir(name string) string { return s.lockRoot() + "{" + name + "}/" }

// kindDir is the directory of the keys of kind in the lock name.
func (s *Store) kindDir(name string, kind store.Kind) string {
	return s.lockDir(name) + string(letters[kind]) + "/"
}

func (s *Store) markKey(owner, name string) string { return s.prefix + "mark/" + owner + "/" + name }

// nameOf returns the lock name of a key under lockRoot.
func (s *Store) nameOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.lockRoot()+"{")
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, "}/")
	return name, ok
}

// letterOf returns the kind letter of a key under dir, the lock's
// directory.
func letterOf(dir, key string) byte {
	if len(key) > len(dir) {
		return key[len(dir)]
	}
	return 0
}
