package etcdstore

import (
	"encoding/json"
	"math"
	"strconv"
)

// decodeHolding decodes b, a key's value, into h, as json.Unmarshal does.
// A waiter decodes the value of every key ahead of it at each change of
// its queue, and json.Unmarshal's reflection was a fifth of a contended
// client's CPU; so a value as appendJSON writes it, with strings that
// hold no escape and no byte outside ASCII, is read by hand, and anything
// else (another writer's value, a string with an escape) by
// json.Unmarshal. Both give the same holding (FuzzDecodeHolding).
func decodeHolding(b []byte, h *holding) error {
	if scanHolding(b, h) {
		return nil
	}
	*h = holding{}
	return json.Unmarshal(b, h)
}

// scanHolding reads b into h if b is in appendJSON's form: its fields in
// its order, no space, strings without escapes, numbers as integers. It
// reports false, leaving h in any state, if it is not.
func scanHolding(b []byte, h *holding) bool {
	s := scanner{b: b, ok: true}
	h.Owner = s.field(`{"owner":`).str()
	h.Holds = s.field(`,"holds":`).uints()
	if s.opt(`,"writes":`) {
		h.Writes = s.uints()
	}
	h.Seq = s.field(`,"seq":`).uint(math.MaxUint64)
	if s.opt(`,"permits":`) {
		h.Permits = int(s.int(strconv.IntSize))
	}
	if s.opt(`,"capacity":`) {
		h.Capacity = int(s.int(strconv.IntSize))
	}
	if s.opt(`,"value":`) {
		h.Value = s.str()
	}
	h.Revoked = s.opt(`,"revoked":true`)
	h.Host = s.field(`,"host":`).str()
	h.PID = int(s.field(`,"pid":`).int(strconv.IntSize))
	h.Since = s.field(`,"since":`).int(64)
	s.field("}")
	return s.ok && len(s.b) == 0
}

// A scanner reads JSON of a known form from b; a read that does not find
// what it expects clears ok, and every read after it does nothing.
type scanner struct {
	b  []byte
	ok bool
}

// field consumes lit, which must come next.
func (s *scanner) field(lit string) *scanner {
	if s.ok && !s.consume(lit) {
		s.ok = false
	}
	return s
}

// opt consumes lit if it comes next, and reports whether it did.
func (s *scanner) opt(lit string) bool { return s.ok && s.consume(lit) }

func (s *scanner) consume(lit string) bool {
	if len(s.b) < len(lit) || string(s.b[:len(lit)]) != lit {
		return false
	}
	s.b = s.b[len(lit):]
	return true
}

// str reads a string of ASCII characters that need no escape.
func (s *scanner) str() string {
	if !s.ok || len(s.b) == 0 || s.b[0] != '"' {
		s.ok = false
		return ""
	}
	for i := 1; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			v := string(s.b[1:i])
			s.b = s.b[i+1:]
			return v
		case c < 0x20 || c >= 0x80 || c == '\\':
			s.ok = false
			return ""
		}
	}
	s.ok = false
	return ""
}

// uints reads null (nil) or an array of unsigned integers (not nil).
func (s *scanner) uints() []uint64 {
	if !s.ok || s.consume("null") {
		return nil
	}
	if !s.consume("[") {
		s.ok = false
		return nil
	}
	vs := []uint64{}
	if s.consume("]") {
		return vs
	}
	for s.ok {
		vs = append(vs, s.uint(math.MaxUint64))
		if s.consume("]") {
			return vs
		}
		if !s.consume(",") {
			s.ok = false
		}
	}
	return nil
}

// uint reads an unsigned integer no larger than limit, in JSON's form
// (no sign, no leading zero).
func (s *scanner) uint(limit uint64) uint64 {
	n := 0
	for n < len(s.b) && s.b[n] >= '0' && s.b[n] <= '9' {
		n++
	}
	if !s.ok || n == 0 || n > 1 && s.b[0] == '0' {
		s.ok = false
		return 0
	}
	var v uint64
	for _, c := range s.b[:n] {
		d := uint64(c - '0')
		if v > (limit-d)/10 {
			s.ok = false
			return 0
		}
		v = v*10 + d
	}
	s.b = s.b[n:]
	return v
}

// int reads a signed integer that fits in bits bits.
func (s *scanner) int(bits int) int64 {
	limit := uint64(1)<<(bits-1) - 1
	if s.ok && s.consume("-") {
		return -int64(s.uint(limit + 1)) // -(1<<63) wraps to itself
	}
	return int64(s.uint(limit))
}
