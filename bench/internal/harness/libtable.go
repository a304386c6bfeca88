package harness

import "fmt"

// A libTable writes a markdown table of one scenario with a column per
// library, as the read-write lock and semaphore reports do.
type libTable struct {
	r    *Report
	w    func(format string, args ...any)
	scen string
	libs []string
}

// medianOfRatios follows the header of a column of ratios.
const medianOfRatios = " (median of per-run ratios)"

// header writes the table's header row.
func (t libTable) header() {
	var titles []string
	for _, l := range t.libs {
		titles = append(titles, LibTitle(l))
	}
	TableHeader(t.w, "measure: median over runs (min–max); a ratio is the median of the per-run ratios", titles)
}

// row writes a row named name, each library's cell from cell.
func (t libTable) row(name string, cell func(l string) string) {
	t.w("| %s |", name)
	for _, l := range t.libs {
		t.w(" %s |", cell(l))
	}
	t.w("\n")
}

// withRatio is a cell of m: its median, the spread over runs, and, if the
// library ref ran, the median per-run ratio to it, labelled "× label".
func (t libTable) withRatio(m metric, ref, label string) func(string) string {
	hasRef := t.r.Results[t.scen][ref] != nil
	return func(l string) string {
		s := m.format(t.r.Value(t.scen, l, m)) + " (" + t.r.spread(t.scen, l, m) + ")"
		if hasRef && l != ref {
			s += fmt.Sprintf(", %s× %s", trimRatio(t.r.RatioTo(t.scen, l, ref, m)), label)
		}
		return s
	}
}
