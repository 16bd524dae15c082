// Package charts draws the pictures of kiln's commands with
// gonum.org/v1/plot: line panels of training curves (kiln plot) and bar
// charts of speed ratios (kilnbench -plot), as SVG or PNG.
//
// A Figure is drawn only when it is written, and it is written
// atomically: Save renders to a temporary file beside the target and
// renames it, so a failed run never leaves half a picture.
package charts

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"

	"github.com/kilnml/kiln/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figure is a picture of a fixed size, drawn by its draw function when it
// is written.
type Figure struct {
	Width, Height vg.Length
	draw          func(draw.Canvas)
}

// Formats are the file formats a Figure is written in, by file
// extension.
var Formats = []string{".svg", ".png"}

// Format returns the format of path from its extension (".svg" or
// ".png"), or an error naming the formats when it has another.
func Format(path string) (string, error) {
	ext := strings.ToLower(filepath.Ext(path))
	for _, f := range Formats {
		if ext == f {
			return f, nil
		}
	}
	return "", fmt.Errorf("%s: want a file ending in %s", path, strings.Join(Formats, " or "))
}

// pngDPI is the resolution of PNG output: twice the screen's 72 points an
// inch less a little, sharp on high-density screens and still small.
const pngDPI = 144

// WriteTo draws f and writes it to w in format (".svg" or ".png"). A
// panic while drawing (gonum's plot panics on some degenerate input) is
// returned as an error.
func (f Figure) WriteTo(w io.Writer, format string) (err error) {
	var c vg.CanvasWriterTo
	switch format {
	case ".svg":
		c = vgsvg.New(f.Width, f.Height)
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(f.Width, f.Height), vgimg.UseDPI(pngDPI))}
	default:
		return fmt.Errorf("charts: unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("drawing the chart: %v", r)
		}
	}()
	dc := draw.New(c)
	dc.FillPolygon(color.White, []vg.Point{dc.Min, {X: dc.Max.X, Y: dc.Min.Y}, dc.Max, {X: dc.Min.X, Y: dc.Max.Y}})
	f.draw(dc)
	if format != ".svg" {
		_, err = c.WriteTo(w)
		return err
	}
	// The SVG names its font without embedding it; a viewer without
	// Liberation Sans takes Arial, whose metrics it copies, where it
	// would otherwise take its default, often a serif.
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	_, err = w.Write(bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")))
	return err
}

// Save writes f to path in the format its extension names. It draws the
// whole picture first and then replaces path in one rename, so path holds
// either its old content or the whole new picture.
func (f Figure) Save(path string) error {
	format, err := Format(path)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := f.WriteTo(&buf, format); err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error { _, err := buf.WriteTo(w); return err })
}

// palette is Tableau 10: distinct hues that stay apart for most colour
// vision deficiencies and in greyscale print.
var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, // blue
	{0xf2, 0x8e, 0x2b, 0xff}, // orange
	{0x59, 0xa1, 0x4f, 0xff}, // green
	{0xe1, 0x57, 0x59, 0xff}, // red
	{0xb0, 0x7a, 0xa1, 0xff}, // purple
	{0x76, 0xb7, 0xb2, 0xff}, // teal
	{0x9c, 0x75, 0x5f, 0xff}, // brown
	{0xed, 0xc9, 0x48, 0xff}, // yellow
	{0xff, 0x9d, 0xa7, 0xff}, // pink
	{0xba, 0xb0, 0xac, 0xff}, // grey
}

// Color is the i-th colour of the palette series are drawn in; it cycles
// after ten.
func Color(i int) color.RGBA { return palette[i%len(palette)] }

// Hex is c as gonum's SVG writes it, #RRGGBB.
func Hex(c color.RGBA) string { return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B) }

// newPlot returns a plot with sans-serif text (gonum's default is serif)
// and a light grid behind the data.
func newPlot() *plot.Plot {
	p := plot.New()
	sans := func(f font.Font) font.Font {
		f.Variant = "Sans"
		return f
	}
	p.Title.TextStyle.Font = sans(p.Title.TextStyle.Font)
	p.Legend.TextStyle.Font = sans(p.Legend.TextStyle.Font)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(a.Label.TextStyle.Font)
		a.Tick.Label.Font = sans(a.Tick.Label.Font)
	}
	return p
}

// legendStrip is the width a legend needs beside the plots, with a margin
// on each side.
func legendStrip(l *plot.Legend) vg.Length {
	r := l.Rectangle(draw.Canvas{})
	return r.Max.X - r.Min.X + 2*margin
}

const margin = 6 // points, around the legend
