package charts

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// BarRow is one labelled row of a ratio chart: one value for each set
// (thread count), NaN where the row has none.
type BarRow struct {
	Label  string
	Values []float64
}

// Ratio chart sizes: each row gets a band of rowGap plus barWidth for
// each set; the bars' axis is ratioWidth long beside the row labels.
const (
	barWidth   = 9 * vg.Millimeter / 3 // 3 mm: a bar and its value label
	rowGap     = 5
	ratioWidth = 4.5 * vg.Inch
	// chrome is the title, the ratio axis and its label above and below
	// the bars, and the margin.
	chrome = 76
)

// Ratios is what RatioBars draws.
type Ratios struct {
	Title, Axis string   // the chart's title and the ratio axis's label
	Sets        []string // one bar in each row for each, in its own colour
	Rows        []BarRow // top to bottom
	// Format writes a value at the end of its bar.
	Format func(float64) string
}

// RatioBars draws r's ratios as horizontal bars on a logarithmic axis,
// each bar running from the line at 1 to its value, which is written at
// its end: bars to the right are ratios above 1, bars to the left below.
// A value that is NaN, infinite or not positive gets no bar; RatioBars
// fails when no value is left.
func RatioBars(r Ratios) (Figure, error) {
	title, axis, sets, rows := r.Title, r.Axis, r.Sets, r.Rows
	if len(sets) == 0 {
		return Figure{}, fmt.Errorf("charts: no sets of bars")
	}
	b := &ratioBars{sets: len(sets), xmin: 1, xmax: 1, format: r.Format}
	if b.format == nil {
		b.format = func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) + "×" }
	}
	labels := make([]string, len(rows))
	for i, row := range rows {
		if len(row.Values) != len(sets) {
			return Figure{}, fmt.Errorf("charts: row %q has %d values for %d sets", row.Label, len(row.Values), len(sets))
		}
		labels[len(rows)-1-i] = row.Label // NominalY counts from the bottom
		for _, v := range row.Values {
			if ratioOK(v) {
				b.xmin, b.xmax = min(b.xmin, v), max(b.xmax, v)
				b.bars++
			}
		}
	}
	if b.bars == 0 {
		return Figure{}, fmt.Errorf("charts: no ratio to draw")
	}
	b.rows = rows
	p := newPlot()
	p.Title.Text = title
	p.X.Label.Text = axis
	// The axis is linear in log10 of the ratio: gonum's LogScale places
	// the axis label's glyph box by the arithmetic mean of the range and
	// leaves the data a fraction of the width.
	p.X.Tick.Marker = plot.TickerFunc(ratioTicks)
	p.NominalY(labels...)
	b.label = p.Y.Tick.Label
	b.label.Font.Size = 7
	p.Add(b)

	legend := plot.NewLegend()
	legend.TextStyle.Font = p.Legend.TextStyle.Font
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = 0.25 * vg.Inch
	for i, s := range sets {
		legend.Add(s, barThumb(Color(i)))
	}
	var labelWidth vg.Length
	for _, l := range labels {
		labelWidth = max(labelWidth, p.Y.Tick.Label.Width(l))
	}
	// gonum shrinks the data to fit the axis label above it.
	plotWidth := margin + labelWidth + max(ratioWidth, p.X.Label.TextStyle.Width(axis)+0.25*vg.Inch)
	strip := legendStrip(&legend)
	band := rowGap + vg.Length(len(sets))*barWidth
	f := Figure{Width: plotWidth + strip, Height: vg.Length(len(rows))*band + chrome}
	f.draw = func(c draw.Canvas) {
		pc := c
		pc.Min.X += margin
		pc.Max.X = c.Min.X + plotWidth
		pc.Max.Y -= margin
		p.Draw(pc)
		lc := c
		lc.Min.X = pc.Max.X + margin
		lc.Max.Y -= margin
		legend.Draw(lc)
	}
	return f, nil
}

func ratioOK(v float64) bool { return v > 0 && !math.IsInf(v, 0) }

// ratioBars is the plotter of RatioBars.
type ratioBars struct {
	rows       []BarRow
	sets, bars int
	xmin, xmax float64 // of the values and 1
	label      draw.TextStyle
	format     func(float64) string
}

// pad leaves room past the longest bars for their value labels, as a
// factor on the log axis.
const pad = 1.45

func (b *ratioBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	return math.Log10(b.xmin / pad), math.Log10(b.xmax * pad), -0.5, float64(len(b.rows)) - 0.5
}

func (b *ratioBars) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	one := tx(0) // log10 of 1
	n := len(b.rows)
	band := ty(1) - ty(0)                   // a row's height on the canvas
	thick := 0.8 * band / vg.Length(b.sets) // a bar's
	for i, r := range b.rows {
		top := ty(float64(n-1-i)) + 0.4*band
		for s, v := range r.Values {
			if !ratioOK(v) {
				continue
			}
			y0 := top - vg.Length(s+1)*thick
			x := tx(math.Log10(v))
			c.FillPolygon(Color(s), []vg.Point{{X: one, Y: y0}, {X: x, Y: y0}, {X: x, Y: y0 + thick}, {X: one, Y: y0 + thick}})
			sty := b.label
			sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
			at := vg.Point{X: x + 2, Y: y0 + thick/2}
			if v < 1 {
				sty.XAlign = draw.XRight
				at.X = x - 2
			}
			c.FillText(sty, at, b.format(v))
		}
	}
	c.StrokeLine2(draw.LineStyle{Color: color.Gray{0x40}, Width: vg.Points(1)}, one, c.Min.Y, one, c.Max.Y)
}

// ratioTicks are 1, 2 and 5 times the powers of ten whose log10 is in
// [lo, hi], at that log10 and labelled as ratios; 1 is always among them.
func ratioTicks(lo, hi float64) []plot.Tick {
	ticks := []plot.Tick{{Value: 0, Label: "1×"}}
	for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if l := math.Log10(v); l >= lo && l <= hi && v != 1 {
				ticks = append(ticks, plot.Tick{Value: l, Label: strconv.FormatFloat(v, 'g', -1, 64) + "×"})
			}
		}
	}
	return ticks
}

// barThumb is a legend entry's swatch of a bar colour.
type barThumb color.RGBA

func (t barThumb) Thumbnail(c *draw.Canvas) {
	h := c.Max.Y - c.Min.Y
	y0, y1 := c.Min.Y+0.15*h, c.Max.Y-0.15*h
	c.FillPolygon(color.RGBA(t), []vg.Point{{X: c.Min.X, Y: y0}, {X: c.Max.X, Y: y0}, {X: c.Max.X, Y: y1}, {X: c.Min.X, Y: y1}})
}
