package charts

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one line of a panel: its points in order of X.
type Series struct {
	Label string // its legend entry; series of equal labels share one
	X, Y  []float64
	Color int // index into the palette (Color)
	// Dashed draws a dashed line with a dot at each point: a held-out
	// series, whose points are few (one an epoch) beside the solid
	// training line of the same colour.
	Dashed bool
}

// Panel is one set of axes.
type Panel struct {
	XLabel, YLabel string
	Series         []Series
}

// Panel sizes: wide enough for a few thousand steps of tick labels, and
// two fit side by side on a page.
const (
	panelWidth  = 4.2 * vg.Inch
	panelHeight = 3.2 * vg.Inch
)

// Lines draws panels side by side, all series as lines, with one legend
// to their right naming each label once. It fails on a series whose X
// and Y differ in length or hold a non-finite value.
func Lines(panels []Panel) (Figure, error) {
	if len(panels) == 0 {
		return Figure{}, fmt.Errorf("charts: no panels to draw")
	}
	plots := make([]*plot.Plot, len(panels))
	legend := plot.NewLegend()
	legend.TextStyle.Font = newPlot().Legend.TextStyle.Font
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = 0.35 * vg.Inch
	named := map[string]bool{}
	for i, pan := range panels {
		p := newPlot()
		p.X.Label.Text, p.Y.Label.Text = pan.XLabel, pan.YLabel
		p.X.Tick.Marker = plot.TickerFunc(roundTicks)
		p.Y.Tick.Marker = plot.TickerFunc(roundTicks)
		p.Add(plotter.NewGrid())
		for _, s := range pan.Series {
			thumbs, err := addSeries(p, s)
			if err != nil {
				return Figure{}, fmt.Errorf("charts: series %q: %w", s.Label, err)
			}
			if !named[s.Label] {
				named[s.Label] = true
				legend.Add(s.Label, thumbs...)
			}
		}
		plots[i] = p
	}
	strip := legendStrip(&legend)
	r := legend.Rectangle(draw.Canvas{})
	height := max(panelHeight, r.Max.Y-r.Min.Y+2*margin)
	f := Figure{Width: vg.Length(len(plots))*panelWidth + strip, Height: height}
	f.draw = func(c draw.Canvas) {
		for i, p := range plots {
			x := c.Min.X + vg.Length(i)*panelWidth
			// A margin above and to the right keeps the top tick label
			// and the last step's label off the edge and the next panel.
			p.Draw(draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: x, Y: c.Min.Y}, Max: vg.Point{X: x + panelWidth - 2*margin, Y: c.Max.Y - margin}}})
		}
		lc := c
		lc.Min.X = c.Max.X - strip + margin
		lc.Max.Y -= margin
		legend.Draw(lc)
	}
	return f, nil
}

// addSeries adds s to p and returns what its legend entry shows.
func addSeries(p *plot.Plot, s Series) ([]plot.Thumbnailer, error) {
	if len(s.X) != len(s.Y) {
		return nil, fmt.Errorf("%d x values, %d y values", len(s.X), len(s.Y))
	}
	xys := make(plotter.XYs, len(s.X))
	for i := range xys {
		xys[i] = plotter.XY{X: s.X[i], Y: s.Y[i]}
	}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	line.Color = Color(s.Color)
	line.Width = vg.Points(1.5)
	if !s.Dashed {
		p.Add(line)
		return []plot.Thumbnailer{line}, nil
	}
	line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	dots, err := plotter.NewScatter(xys)
	if err != nil {
		return nil, err
	}
	dots.Color = Color(s.Color)
	dots.Shape = draw.CircleGlyph{}
	dots.Radius = vg.Points(2.5)
	p.Add(line, dots)
	return []plot.Thumbnailer{line, dots}, nil
}

// roundTicks are four to eight ticks at multiples of 1, 2 or 5 times a
// power of ten (0, 400, 800, 1200 where gonum's own ticks would give 100,
// 600, 1100).
func roundTicks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 6, 64)}}
	}
	e := math.Floor(math.Log10((hi - lo) / 4))
	step := math.Pow(10, e)
	for _, m := range []float64{2, 5, 10} {
		if (hi-lo)/step <= 8 {
			break
		}
		step = m * math.Pow(10, e)
	}
	prec := max(0, int(-math.Floor(math.Log10(step))))
	var ticks []plot.Tick
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9; k++ {
		v := k * step
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', prec, 64)})
	}
	return ticks
}
