// Package glob matches lock names against the patterns of List.
package glob

// Match reports whether name matches the glob pattern as Redis's SCAN
// MATCH reads it (store.Lister): * any characters, / included, ? one
// character, [abc] or [a-z] one of a class ([^abc] none of it), and \
// escapes the next character.
func Match(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			if len(p) == 0 {
				return true
			}
			for i := range len(n) + 1 {
				if Match(string(p), string(n[i:])) {
					return true
				}
			}
			return false
		case '?':
			if len(n) == 0 {
				return false
			}
		case '[':
			if len(n) == 0 {
				return false
			}
			rest, ok := matchClass(p[1:], n[0])
			if !ok {
				return false
			}
			p, n = rest, n[1:]
			continue
		case '\\':
			if len(p) > 1 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(n) == 0 || p[0] != n[0] {
				return false
			}
		}
		p, n = p[1:], n[1:]
	}
	return len(n) == 0
}

// matchClass matches c against the class that p starts (after its '['),
// and returns the pattern after the class.
func matchClass(p []rune, c rune) ([]rune, bool) {
	negate := len(p) > 0 && p[0] == '^'
	if negate {
		p = p[1:]
	}
	in := false
	for len(p) > 0 && p[0] != ']' {
		switch {
		case p[0] == '\\' && len(p) > 1:
			in = in || p[1] == c
			p = p[2:]
		case len(p) > 2 && p[1] == '-' && p[2] != ']':
			lo, hi := min(p[0], p[2]), max(p[0], p[2])
			in = in || (lo <= c && c <= hi)
			p = p[3:]
		default:
			in = in || p[0] == c
			p = p[1:]
		}
	}
	if len(p) > 0 {
		p = p[1:] // ']'
	}
	return p, in != negate
}
