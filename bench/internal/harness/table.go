package harness

// TableHeader writes with w the head of a markdown table: first, then
// cols, right-aligned.
func TableHeader(w func(string, ...any), first string, cols []string) {
	w("| %s |", first)
	for _, c := range cols {
		w(" %s |", c)
	}
	w("\n|---|")
	for range cols {
		w("---:|")
	}
	w("\n")
}
