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

// Channel is where releases are published.
func (k Keys) Channel(name string) string { return k.Lock(name) + ":released" }

// Slot is the Redis Cluster slot of every key of the named lock.
func Slot(name string) int { return int(crc16(name) % 16384) }

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
