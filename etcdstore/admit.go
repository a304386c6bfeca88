package etcdstore

// Etcd runs no scripts, so nobody writes a grant: the order of the keys is
// the grant. The contenders of a lock, in create-revision order, hold it
// as follows:
//
//   - a mutex, a fair mutex, an election: the first key;
//   - a read-write lock: every key before the first writer's, or the first
//     key if it is a writer's;
//   - a semaphore: the longest run of keys from the first whose permits
//     fit in the capacity, in order (a big request is not passed by small
//     ones behind it).
//
// A key that holds keeps holding until it is deleted: keys only join at
// the end, deletes only let more in, and a writer only ever turns into a
// reader (its write holds released). So a release, an expiry or a
// force-unlock grants the lock to the next in line in the same Raft
// entry, and a waiter learns of it by a read.

// admitted reports whether cs[i] holds the lock; capacity is a
// semaphore's.
func admitted(cs []contender, i, capacity int) bool {
	switch cs[i].letter {
	case 'w':
		if cs[i].writes() {
			return i == 0
		}
		for _, c := range cs[:i] {
			if c.writes() {
				return false
			}
		}
		return true
	case 's':
		used := 0
		for _, c := range cs[:i+1] {
			used += c.Permits
		}
		return used <= capacity
	}
	return i == 0
}

// fitsNow reports whether a new key at the end of cs would hold the lock
// at once: a reader behind no writer, or permits that fit beside those
// held when nobody waits.
func fitsNow(cs []contender, h holding, letter byte, capacity int) bool {
	switch letter {
	case 'w':
		if h.writes() {
			return len(cs) == 0
		}
		for _, c := range cs {
			if c.writes() {
				return false
			}
		}
		return true
	case 's':
		used := h.Permits
		for _, c := range cs {
			used += c.Permits
		}
		return used <= capacity
	}
	return len(cs) == 0
}

// holders returns the contenders that hold the lock.
func holders(cs []contender) []contender {
	capacity := capacityOf(cs, 0)
	var hs []contender
	for i := range cs {
		if admitted(cs, i, capacity) {
			hs = append(hs, cs[i])
		}
	}
	return hs
}
