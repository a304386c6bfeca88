package harness

import (
	"os"
	"strings"
)

// SpliceMarked writes md into file between the markers
// "<!-- name:begin -->" and "<!-- name:end -->", keeping the rest of the
// file; a file without them (or no file) gets both markers and md
// appended. sqlbench and etcdbench write their reports with it; Splice is
// lockbench's.
func SpliceMarked(file, name, md string) error {
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(b)
	block := begin + "\n" + md + end
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i >= 0 && j > i {
		s = s[:i] + block + s[j+len(end):]
	} else {
		s += "\n" + block + "\n"
	}
	return os.WriteFile(file, []byte(s), 0o644)
}
