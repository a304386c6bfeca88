package harness

import (
	"fmt"
	"strings"
	"time"
)

// headMarkdown writes what opens a report: the exact command, its runs and
// how long it took, the machine, and how to read the figures, so that the
// prose around a generated block need not repeat them.
func (r *Report) headMarkdown(b *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("Generated in %s (%s) by this command, run in `bench/`:\n\n```sh\n%s\n```\n\n", formatTook(r.Took), r.runCounts(), r.Command)
	if r.Machine != "" {
		w("%s\n\n", r.Machine)
	}
	if r.hasRuns() {
		w("Every figure of scenarios a–e and g–k is the median of %d runs; run *i* of every library used the same redis-server, one library after another (FLUSHALL in between, the order rotated each run). A ratio is the library's figure divided by the raw go-redis baseline's figure **of the same run**, median over runs: the median of the per-run ratios, which need not equal the ratio of the medians shown beside it.\n\n", r.Runs)
	}
}

// hasRuns reports whether any scenario with runs (a–e, g–k) ran.
func (r *Report) hasRuns() bool {
	return len(r.timedScenarios()) > 0 || r.Results[ScenG] != nil || r.Results[ScenH] != nil || r.Results[ScenI] != nil || r.Results[ScenJ] != nil || r.Results[ScenK] != nil
}

// runCounts says how many runs of which scenarios the report has, as
// "5 runs of scenarios a, b, c, d and e, 1 run of f".
func (r *Report) runCounts() string {
	var ran []string
	for _, s := range r.Scenarios {
		if s != ScenF && r.Results[s] != nil {
			ran = append(ran, s)
		}
	}
	var parts []string
	if len(ran) == 1 {
		parts = append(parts, fmt.Sprintf("%s of scenario %s", count(r.Runs, "run"), ran[0]))
	} else if len(ran) > 1 {
		parts = append(parts, fmt.Sprintf("%s of scenarios %s and %s", count(r.Runs, "run"), strings.Join(ran[:len(ran)-1], ", "), ran[len(ran)-1]))
	}
	if len(r.Scale) > 0 {
		parts = append(parts, fmt.Sprintf("%s of f", count(len(r.Scale), "run")))
	}
	return strings.Join(parts, ", ")
}

// count is n and the noun, plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// formatTook writes a duration for readers: "3 min 3 s", "45 s".
func formatTook(d time.Duration) string {
	d = d.Round(time.Second)
	if m := d / time.Minute; m > 0 {
		return fmt.Sprintf("%d min %d s", m, (d%time.Minute)/time.Second)
	}
	return fmt.Sprintf("%d s", d/time.Second)
}
