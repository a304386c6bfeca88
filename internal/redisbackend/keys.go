package redisbackend

// Keys names the Redis keys and channel of each lock. Every name of one
// lock carries the lock name as its hash tag, {name}, so all of them live in
// the same Redis Cluster slot. Lock names must not contain braces (the
// public package rejects them), so the tag is always exactly the name.
type Keys struct {
	Prefix string
}

// Lock is the hash that holds the lock state.
func (k Keys) Lock(name string) string { return k.Prefix + "{" + name + "}" }

// Fence is the fencing counter.
func (k Keys) Fence(name string) string { return k.Lock(name) + ":fence" }

// Abandoned marks an owner of the named lock as abandoned (abandon.lua):
// acquire.lua refuses that owner while the key exists.
func (k Keys) Abandoned(name, owner string) string { return k.Lock(name) + ":abandoned:" + owner }

// Queue is a fair mutex's queue: owner -> arrival.
func (k Keys) Queue(name string) string { return k.Lock(name) + ":q" }

// QueueDeadlines holds when each place of a fair mutex's queue expires.
func (k Keys) QueueDeadlines(name string) string { return k.Lock(name) + ":qt" }

// QueueInfo holds what a grant needs to know of each place.
func (k Keys) QueueInfo(name string) string { return k.Lock(name) + ":qi" }

// Holders holds when the lease of each holder of a shared lock (read-write
// lock, semaphore) ends.
func (k Keys) Holders(name string) string { return k.Lock(name) + ":h" }

// Capacity is a semaphore's number of permits.
func (k Keys) Capacity(name string) string { return k.Lock(name) + ":cap" }

// lockKeys are the eight keys the lock scripts take, in the order they
// take them (see scripts/lib.lua; acquire.lua and release_plain.lua take
// fewer, see plain).
type lockKeys [8]string

// script returns the lock scripts' keys of the named lock. owner names
// the abandonment mark, the seventh; scripts without an owner get the mark
// of the empty owner, which they do not use.
func (k Keys) script(name, owner string) lockKeys {
	// One string holds the eight, one after the other: one allocation.
	lock := k.Lock(name)
	all := lock + lock + ":fence" + lock + ":q" + lock + ":qt" + lock + ":qi" + lock + ":h" +
		lock + ":abandoned:" + owner + lock + ":cap"
	var keys lockKeys
	for i, suffix := range [...]int{0, len(":fence"), len(":q"), len(":qt"), len(":qi"), len(":h"), len(":abandoned:") + len(owner), len(":cap")} {
		n := len(lock) + suffix
		keys[i] = all[:n]
		all = all[n:]
	}
	return keys
}

// plain returns the four keys acquire.lua takes: the lock hash, the
// fencing counter, the queue (only looked at) and owner's abandonment mark.
func (k Keys) plain(name, owner string) [4]string {
	// One string holds the four, one after the other: one allocation.
	lock := k.Lock(name)
	all := lock + lock + ":fence" + lock + ":q" + lock + ":abandoned:" + owner
	n := len(lock)
	fence, q := 2*n+len(":fence"), 3*n+len(":fence:q")
	return [4]string{all[:n], all[n:fence], all[fence:q], all[q:]}
}

// shared returns the three keys shared_renew.lua takes of a holder of a
// shared lock: the lock hash, the holders and a semaphore's capacity.
func (k Keys) shared(name string) [3]string {
	// One string holds the three, one after the other: one allocation.
	lock := k.Lock(name)
	all := lock + lock + ":h" + lock + ":cap"
	n := len(lock)
	return [3]string{all[:n], all[n : 2*n+len(":h")], all[2*n+len(":h"):]}
}

// Channel is where releases of a plain lock are published (release_plain.lua
// names it itself, from the lock hash's key).
func (k Keys) Channel(name string) string { return k.Lock(name) + ":released" }

// Done is the record of a job that runs once (per key, or per period)
// under the lock of that name.
func (k Keys) Done(name string) string { return k.Lock(name) + ":done" }

// Leader is where an election announces each new leader (and that nobody
// leads).
func (k Keys) Leader(name string) string { return k.Lock(name) + ":leader" }

// Grants is where grants of a fair lock to owners of the Backend whose id
// is process are published: each process hears of its own grants only.
func (k Keys) Grants(name, process string) string { return k.Lock(name) + ":grant:" + process }

// HolderChannel is where the process with process id pid on host hears
// that a lock was force-unlocked from one of its owners (forceunlock.lua).
func (k Keys) HolderChannel(host, pid string) string { return k.holderChannels() + host + ":" + pid }

// holderChannels is the prefix of every HolderChannel.
func (k Keys) holderChannels() string { return k.Prefix + "holder:" }

// Slot is the Redis Cluster slot of every key of the named lock.
func Slot(name string) int { return int(crc16(name) % 16384) }

// KeySlot is the Redis Cluster slot of key (or of a sharded channel).
func KeySlot(key string) int { return int(crc16(hashTag(key)) % 16384) }

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
