package logtail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSizeFromLast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if Size(path) != 0 || From(path, 0) != "" || Last("") != "(no output)" {
		t.Fatal("a missing file must read as empty")
	}
	if err := os.WriteFile(path, []byte("before\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mark := Size(path)
	var b strings.Builder
	for i := range 40 {
		b.WriteString(strings.Repeat("x", i) + "\n")
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(b.String())
	f.Close()
	got := Last(From(path, mark))
	lines := strings.Split(got, "\n")
	if len(lines) != Lines || strings.Contains(got, "before") || lines[Lines-1] != strings.Repeat("x", 39) {
		t.Fatalf("Last(From(mark)) = %d lines, %q…", len(lines), lines[0])
	}
}
