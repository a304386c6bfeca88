package glob

import "testing"

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "a/b", true},
		{"a*", "abc", true},
		{"a*", "ba", false},
		{"nightly-*", "nightly-2026/11", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"[ab]x", "bx", true},
		{"[ab]x", "cx", false},
		{"[^ab]x", "cx", true},
		{"[a-c]", "b", true},
		{"[a-c]", "d", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"*b*d", "abcd", true},
		{"*b*d", "abce", false},
		{"jobs", "jobs", true},
		{"jobs", "job", false},
	} {
		if got := Match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}
