package harness

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// A ChartGroup is one scenario's bars: the ratio of each library to the
// baseline, higher is better.
type ChartGroup struct {
	Label  string
	Ratios map[string]float64 // by library; missing or NaN: no bar
}

var libColors = map[string]color.RGBA{
	Distlock:     {0xd6, 0x27, 0x28, 0xff},
	DistlockFair: {0x8c, 0x1a, 0x4b, 0xff},
	Redsync:      {0x1f, 0x77, 0xb4, 0xff},
	Redislock:    {0x2c, 0xa0, 0x2c, 0xff},
	Rueidislock:  {0xff, 0x7f, 0x0e, 0xff},
	RawPubSub:    {0x94, 0x67, 0xbd, 0xff},
}

var (
	black = color.RGBA{0x20, 0x20, 0x20, 0xff}
	grey  = color.RGBA{0xbb, 0xbb, 0xbb, 0xff}
	light = color.RGBA{0xe8, 0xe8, 0xe8, 0xff}
)

// DrawChart writes a PNG of diverging bars on a log scale: each bar goes
// from the baseline (1×) up to a library's ratio (better) or down to it
// (worse), one group per scenario.
func DrawChart(path, title, subtitle string, libs []string, groups []ChartGroup) error {
	img := RenderChart(title, subtitle, libs, groups)
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

// RenderChart draws the chart of DrawChart.
func RenderChart(title, subtitle string, libs []string, groups []ChartGroup) *image.RGBA {
	var bars []string // the libraries that get bars: all but the baseline
	seen := map[string]bool{Raw: true}
	for _, l := range libs {
		if !seen[l] {
			seen[l] = true
			bars = append(bars, l)
		}
	}
	const (
		barW   = 40
		gap    = 50
		left   = 70
		right  = 20
		top    = 78
		bottom = 84
		plotH  = 420
	)
	groupW := len(bars)*barW + gap
	W := left + right + max(1, len(groups))*groupW
	W = max(W, 760)
	H := top + plotH + bottom
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)

	// The scale: decades around every ratio, at least 0.1× to 10×.
	lo, hi := 0.1, 10.0
	for _, g := range groups {
		for _, l := range bars {
			v, ok := g.Ratios[l]
			if !ok || math.IsNaN(v) || v <= 0 {
				continue
			}
			// Room for the value label beyond the bar's end.
			lo = math.Min(lo, math.Pow(10, math.Floor(math.Log10(v/2))))
			hi = math.Max(hi, math.Pow(10, math.Ceil(math.Log10(v*1.5))))
		}
	}
	y := func(v float64) int {
		f := (math.Log10(v) - math.Log10(lo)) / (math.Log10(hi) - math.Log10(lo))
		return top + plotH - int(math.Round(f*plotH))
	}
	plotR := W - right

	// Grid: decades labelled, 2× and 5× lines light.
	for d := lo; d <= hi*1.001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := d * m
			if v > hi*1.001 {
				break
			}
			c := light
			if m == 1 {
				c = grey
				label := strconvG(v) + "×"
				text(img, left-8-7*len(label), y(v)+4, label, black)
			}
			hline(img, left, plotR, y(v), c)
		}
	}
	// The baseline.
	for t := 0; t < 2; t++ {
		hline(img, left, plotR, y(1)+t, black)
	}
	vline(img, left, top, top+plotH, black)

	text(img, left, 20, title, black)
	text(img, left, 38, subtitle, black)
	// Legend.
	lx := left
	for _, l := range bars {
		fill(img, image.Rect(lx, 50, lx+14, 62), libColors[l])
		text(img, lx+18, 61, LibTitle(l), black)
		lx += 18 + 7*len(LibTitle(l)) + 24
	}
	text(img, lx, 61, "baseline 1× = "+LibTitle(Raw), black)

	for gi, g := range groups {
		x0 := left + gi*groupW + gap/2
		for bi, l := range bars {
			v, ok := g.Ratios[l]
			if !ok || math.IsNaN(v) || v <= 0 {
				continue
			}
			x := x0 + bi*barW
			y0, y1 := y(1), y(v)
			r := image.Rect(x+3, min(y0, y1), x+barW-3, max(y0, y1)+1)
			fill(img, r, libColors[l])
			label := trimRatio(v)
			lxp := x + (barW-7*len(label))/2
			if v >= 1 {
				text(img, lxp, y1-4, label, black)
			} else {
				text(img, lxp, y1+13, label, black)
			}
		}
		for li, line := range wrap(g.Label, groupW/7-1) {
			if li == 4 {
				break
			}
			text(img, left+gi*groupW+4, top+plotH+18+li*14, line, black)
		}
	}
	return img
}

func strconvG(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

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

func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
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
