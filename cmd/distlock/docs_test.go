package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the root of the repository, from this package's directory.
const repoRoot = "../.."

// docsOfTheCommand are the documents that the command's engineers keep,
// relative to repoRoot.
var docsOfTheCommand = []string{"README.md", "docs/cli.md", "docs/design-queued.md"}

var (
	// docPath is a path in backquotes or a link target: `internal/x.go`,
	// (docs/cli.md#anchor).
	docPath = regexp.MustCompile("(?:`|\\]\\()([A-Za-z0-9_./-]+/[A-Za-z0-9_.-]+\\.(?:go|lua|md|sh))(?:`|[)#])")
	// docTest is the name of a test in backquotes: `TestRunQueuedDefaults`.
	docTest = regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")
	// issueRef is a reference to an issue by number, which a reader of
	// the repository cannot follow.
	issueRef = regexp.MustCompile(`(?i)\bissues? #?\d+|\(#\d+\)`)
)

// TestDocsSelfContained checks that the documents the command's
// engineers keep refer only to what the repository holds: every file
// they name exists, every test they name is defined, and they refer to
// no file outside the repository and to no issue by number.
func TestDocsSelfContained(t *testing.T) {
	t.Parallel()
	tests := make(map[string]bool)
	defined := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != repoRoot {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range defined.FindAllStringSubmatch(string(b), -1) {
			tests[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docsOfTheCommand {
		b, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range docPath.FindAllStringSubmatch(text, -1) {
			path := m[1]
			if strings.HasPrefix(path, "../") || strings.HasPrefix(path, "/") {
				t.Errorf("%s refers to %s, outside the repository", doc, path)
				continue
			}
			base := repoRoot
			if strings.HasPrefix(m[0], "](") { // a link, relative to the document
				base = filepath.Join(repoRoot, filepath.Dir(doc))
			}
			if _, err := os.Stat(filepath.Join(base, path)); err != nil {
				t.Errorf("%s refers to %s, which the repository does not hold", doc, path)
			}
		}
		for _, m := range docTest.FindAllStringSubmatch(text, -1) {
			if !tests[m[1]] {
				t.Errorf("%s names the test %s, which no test file defines", doc, m[1])
			}
		}
		for _, ref := range issueRef.FindAllString(text, -1) {
			t.Errorf("%s refers to %q: say what it is instead", doc, ref)
		}
		if strings.Contains(text, "../") {
			t.Errorf("%s has a relative path out of the repository (\"../\")", doc)
		}
	}
}
