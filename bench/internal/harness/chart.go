package harness

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// A ChartPanel is one scenario's panel of the chart: every library's
// figure, baseline included, as a bar with the figure and its ratio to the
// baseline written on it.
type ChartPanel struct {
	Title       string // the scenario
	Metric      string // what the figure is, with its unit
	LowerBetter bool
	Bars        []ChartBar // in report order, the baseline first
}

// A ChartBar is one library's figure in a panel.
type ChartBar struct {
	Lib   string
	Value float64 // the bar's length; NaN or <= 0: no bar
	Text  string  // the figure as the tables write it
	Ratio float64 // to the baseline of the same run, median over runs; NaN: not shown
}

var libColors = map[string]color.RGBA{
	Raw:          {0x7f, 0x7f, 0x7f, 0xff},
	Distlock:     {0xd6, 0x27, 0x28, 0xff},
	DistlockFair: {0x8c, 0x1a, 0x4b, 0xff},
	Redsync:      {0x1f, 0x77, 0xb4, 0xff},
	Redislock:    {0x2c, 0xa0, 0x2c, 0xff},
	Rueidislock:  {0xff, 0x7f, 0x0e, 0xff},
	RawPubSub:    {0x94, 0x67, 0xbd, 0xff},
	DistlockProm: {0xe8, 0x6f, 0x6f, 0xff},
	DistlockOtel: {0xf2, 0xa8, 0xa8, 0xff},
}

var (
	black = color.RGBA{0x20, 0x20, 0x20, 0xff}
	grey  = color.RGBA{0xbb, 0xbb, 0xbb, 0xff}
	light = color.RGBA{0xf2, 0xf2, 0xf2, 0xff}
)

// DrawChart writes a PNG of one small panel per scenario, two panels a
// row: horizontal bars from zero, each labelled with the library's figure
// and its ratio to the baseline, and each panel saying whether higher or
// lower is better.
func DrawChart(path, title, subtitle string, panels []ChartPanel) error {
	img := RenderChart(title, subtitle, panels)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// The chart's layout, in pixels (the font is 7×13).
const (
	panelW    = 680
	panelGap  = 24
	margin    = 16
	headerH   = 56 // above the first row of panels
	titleH    = 44 // a panel's title and metric lines
	barH      = 18
	barGap    = 6
	nameW     = 33 * 7 // the library names' column
	labelW    = 24 * 7 // room for the figure and ratio after the longest bar
	panelsRow = 2
)

// RenderChart draws the chart of DrawChart.
func RenderChart(title, subtitle string, panels []ChartPanel) *image.RGBA {
	rows := (len(panels) + panelsRow - 1) / panelsRow
	heights := make([]int, rows)
	for i, p := range panels {
		heights[i/panelsRow] = max(heights[i/panelsRow], panelHeight(p))
	}
	W := 2*margin + panelsRow*panelW + (panelsRow-1)*panelGap
	H := headerH + margin
	for _, h := range heights {
		H += h + panelGap
	}
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	text(img, margin, 20, title, black)
	text(img, margin, 38, subtitle, black)
	y := headerH
	for r, h := range heights {
		for c := range panelsRow {
			if i := r*panelsRow + c; i < len(panels) {
				drawPanel(img, margin+c*(panelW+panelGap), y, panels[i])
			}
		}
		y += h + panelGap
	}
	return img
}

func panelHeight(p ChartPanel) int { return titleH + len(p.Bars)*(barH+barGap) + 8 }

// drawPanel draws p with its top left corner at x0, y0. The scale is
// linear from zero, unless the figures span more than 30×: then it is
// logarithmic (and says so), so that the short bars stay readable.
func drawPanel(img *image.RGBA, x0, y0 int, p ChartPanel) {
	fill(img, image.Rect(x0, y0, x0+panelW, y0+panelHeight(p)), light)
	text(img, x0+8, y0+16, p.Title, black)
	lo, hi := math.Inf(1), 0.0
	for _, b := range p.Bars {
		if b.Value > 0 && !math.IsNaN(b.Value) {
			lo, hi = math.Min(lo, b.Value), math.Max(hi, b.Value)
		}
	}
	logScale := hi > 30*lo
	better := "higher is better"
	if p.LowerBetter {
		better = "lower is better"
	}
	scale := ""
	if logScale {
		scale = ", log scale"
	}
	text(img, x0+8, y0+33, fmt.Sprintf("%s (%s%s); x baseline", p.Metric, better, scale), black)
	plotL, plotR := x0+nameW+8, x0+panelW-labelW
	length := func(v float64) int {
		if logScale {
			floor := lo / 2
			return int(math.Round(float64(plotR-plotL) * math.Log(v/floor) / math.Log(hi/floor)))
		}
		return int(math.Round(float64(plotR-plotL) * v / hi))
	}
	vline(img, plotL, y0+titleH-2, y0+panelHeight(p)-6, grey)
	for i, b := range p.Bars {
		y := y0 + titleH + i*(barH+barGap)
		text(img, x0+8, y+barH-5, LibTitle(b.Lib), black)
		label := b.Text
		if !math.IsNaN(b.Ratio) && b.Lib != Raw {
			label += "  " + trimRatio(b.Ratio) + "x"
		} else if b.Lib == Raw {
			label += "  (baseline)"
		}
		end := plotL
		if b.Value > 0 && !math.IsNaN(b.Value) {
			end = plotL + max(1, length(b.Value))
			fill(img, image.Rect(plotL, y, end, y+barH), libColors[b.Lib])
		}
		text(img, end+6, y+barH-5, label, black)
	}
}

// trimRatio formats a ratio with about two significant digits.
func trimRatio(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 0.1:
		return fmt.Sprintf("%.2f", v)
	case v >= 0.01:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.4f", v)
}

// asciiOnly maps what the ASCII-only basicfont lacks.
var asciiOnly = strings.NewReplacer("×", "x", "µ", "u", "–", "-", "—", "-", "≥", ">=", "≤", "<=")

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	s = asciiOnly.Replace(s)
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

func hline(img *image.RGBA, x0, x1, y int, c color.Color) {
	fill(img, image.Rect(x0, y, x1, y+1), c)
}

func vline(img *image.RGBA, x, y0, y1 int, c color.Color) {
	fill(img, image.Rect(x, y0, x+1, y1), c)
}
