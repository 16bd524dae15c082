package draw

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/kilnml/kiln/graph"
)

// Colours and margins of the SVG drawing.
const (
	margin      = 20.0
	titleSize   = 15.0
	edgeColour  = "#555555"
	textColour  = "#111827"
	scopeColour = "#6b7280"
	opStroke    = "#6b7280"
	boldStroke  = "#1f2937" // fused ops, inputs and outputs
	legendGap   = 40.0      // between the graph and the legend on its right
	swatchSize  = 14.0
	arrowLen    = 8.0 // an arrowhead's length and width
	arrowW      = 7.0
)

// SVG lays g out and writes it as a standalone SVG image: the boxes of
// DOT, top to bottom from the inputs, edges as curves with arrowheads, a
// legend of the dtype colours on the right. Each box is a <rect> whose
// class says what it is ("op", "input" or "output"), each edge a <path
// class="edge">. It fails on a graph that graph.Validate rejects, or when
// w does.
func SVG(w io.Writer, g *graph.Graph, opts ...Option) error {
	d, err := newDrawing(g, opts)
	if err != nil {
		return err
	}
	top := margin
	if d.title != "" {
		top += titleSize + 12
	}
	lay := newLayout(d, top)
	right, bottom := lay.bounds()
	legendX := margin + right + legendGap
	legendW, legendH := legendSize(d)
	width := legendX + legendW + margin
	height := max(bottom, top+legendH) + margin

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="%s">`+"\n",
		num(width), num(height), num(width), num(height), num(fontSize))
	fmt.Fprintf(bw, `<rect class="background" x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`+"\n", num(width), num(height))
	if d.title != "" {
		fmt.Fprintf(bw, `<text class="title" x="%s" y="%s" font-size="%s" font-weight="bold" fill="%s">%s</text>`+"\n",
			num(margin), num(margin+titleSize), num(titleSize), textColour, escape(d.title))
	}
	bw.WriteString(`<g class="edges">` + "\n")
	// Arrowheads are paths of their own, not markers, which not every
	// SVG renderer draws.
	for e := range d.edges {
		path, tipX, tipY := lay.edgePath(e, margin)
		fmt.Fprintf(bw, `<path class="edge" d="%s" fill="none" stroke="%s" stroke-width="1.2"/>`, path, edgeColour)
		fmt.Fprintf(bw, `<path class="arrowhead" d="M%s,%s L%s,%s L%s,%s z" fill="%s"/>`+"\n",
			num(tipX-arrowW/2), num(tipY-arrowLen), num(tipX), num(tipY), num(tipX+arrowW/2), num(tipY-arrowLen), edgeColour)
	}
	bw.WriteString("</g>\n")
	bw.WriteString(`<g class="nodes">` + "\n")
	for i, b := range d.boxes {
		x, y, w, h := lay.rect(i)
		writeBox(bw, b, x+margin, y, w, h)
	}
	bw.WriteString("</g>\n")
	writeLegend(bw, d, legendX, top)
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// writeBox writes box b at (x, y), w by h: a rounded rectangle (a pill
// for an input or output) and its label, one <text> per line.
func writeBox(bw *bufio.Writer, b box, x, y, w, h float64) {
	stroke, width, rx := opStroke, 1.0, 6.0
	switch {
	case b.kind != opBox:
		stroke, width, rx = boldStroke, 1.5, h/2
	case b.fused:
		stroke, width = boldStroke, 2.5
	}
	fmt.Fprintf(bw, `<g id="%s">`, b.id)
	fmt.Fprintf(bw, `<rect class="%s" x="%s" y="%s" width="%s" height="%s" rx="%s" fill="%s" stroke="%s" stroke-width="%s"/>`,
		b.kind.class(), num(x), num(y), num(w), num(h), num(rx), fill(b.dtype), stroke, num(width))
	for i, l := range b.lines {
		attrs := fmt.Sprintf(`fill="%s"`, textColour)
		switch l.style {
		case titleLine:
			attrs += ` font-weight="bold"`
		case scopeLine:
			attrs = fmt.Sprintf(`fill="%s"`, scopeColour)
		}
		fmt.Fprintf(bw, `<text x="%s" y="%s" text-anchor="middle" %s>%s</text>`,
			num(x+w/2), num(y+padY+float64(i+1)*lineHeight-3.5), attrs, escape(l.text))
	}
	bw.WriteString("</g>\n")
}

// legendEntries are the lines of the legend, after its heading: the dtype
// colours the drawing uses, then the borders.
func legendEntries(d *drawing) []string {
	var entries []string
	for _, dt := range d.dtypes {
		entries = append(entries, legendText(dt))
	}
	return append(entries, "fused op", "input, output")
}

const legendHeading = "fill: result dtype"

// legendSize is the size the legend takes.
func legendSize(d *drawing) (w, h float64) {
	chars := utf8.RuneCountInString(legendHeading)
	for _, e := range legendEntries(d) {
		chars = max(chars, utf8.RuneCountInString(e)+4)
	}
	return float64(chars) * charWidth, float64(len(legendEntries(d))+1) * (swatchSize + 8)
}

// writeLegend writes the legend with its top left corner at (x, y): a
// swatch of each dtype colour, a fused op's border, an input's shape.
func writeLegend(bw *bufio.Writer, d *drawing, x, y float64) {
	bw.WriteString(`<g class="legend">` + "\n")
	step := swatchSize + 8
	fmt.Fprintf(bw, `<text x="%s" y="%s" font-weight="bold" fill="%s">%s</text>`+"\n", num(x), num(y+swatchSize-2), textColour, legendHeading)
	entry := func(i int, fillColour, stroke string, width, rx float64, text string) {
		top := y + float64(i+1)*step
		fmt.Fprintf(bw, `<rect class="legend" x="%s" y="%s" width="%s" height="%s" rx="%s" fill="%s" stroke="%s" stroke-width="%s"/>`,
			num(x), num(top), num(2*swatchSize), num(swatchSize), num(rx), fillColour, stroke, num(width))
		fmt.Fprintf(bw, `<text x="%s" y="%s" fill="%s">%s</text>`+"\n", num(x+2*swatchSize+8), num(top+swatchSize-3), textColour, escape(text))
	}
	for i, dt := range d.dtypes {
		entry(i, fill(dt), opStroke, 1, 3, legendText(dt))
	}
	n := len(d.dtypes)
	entry(n, "#ffffff", boldStroke, 2.5, 3, "fused op")
	entry(n+1, "#ffffff", boldStroke, 1.5, swatchSize/2, "input, output")
	bw.WriteString("</g>\n")
}

// edgePath is the SVG path of edge e, shifted right by dx: from its port
// at the bottom of its source box, through each layer it passes (straight
// down the layer's band), to its arrowhead on top of its target box,
// curving from layer to layer. It returns the path and the arrowhead's
// tip, which the path leaves room for.
func (lay *layout) edgePath(e int, dx float64) (path string, tipX, tipY float64) {
	route := lay.routes[e]
	var pts [][2]float64
	_, y, _, h := lay.rect(route[0])
	pts = append(pts, [2]float64{lay.ports[e][0], y + h})
	for _, n := range route[1 : len(route)-1] {
		l := lay.nodes[n].layer
		x := lay.nodes[n].x
		pts = append(pts, [2]float64{x, lay.layerY[l]}, [2]float64{x, lay.layerY[l] + lay.layerH[l]})
	}
	_, y, _, _ = lay.rect(route[len(route)-1])
	pts = append(pts, [2]float64{lay.ports[e][1], y - arrowLen + 1})

	var b strings.Builder
	fmt.Fprintf(&b, "M%s,%s", num(pts[0][0]+dx), num(pts[0][1]))
	for i := 1; i < len(pts); i++ {
		p, q := pts[i-1], pts[i]
		if i%2 == 0 {
			// Down a layer's band, past its boxes.
			fmt.Fprintf(&b, " L%s,%s", num(q[0]+dx), num(q[1]))
			continue
		}
		mid := (p[1] + q[1]) / 2
		fmt.Fprintf(&b, " C%s,%s %s,%s %s,%s", num(p[0]+dx), num(mid), num(q[0]+dx), num(mid), num(q[0]+dx), num(q[1]))
	}
	return b.String(), lay.ports[e][1] + dx, y
}

// num writes a coordinate with at most one decimal.
func num(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}

// escape escapes text for an SVG text node or attribute.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}
