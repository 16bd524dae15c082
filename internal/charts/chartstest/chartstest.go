// Package chartstest reads back the SVG that package charts writes, for
// tests: its paths and its text.
package chartstest

import (
	"encoding/xml"
	"image/color"
	"strings"
	"testing"

	"github.com/kilnml/kiln/internal/charts"
	"github.com/kilnml/kiln/internal/svgtest"
)

// Path is one <path> element: its data and its style properties.
type Path struct {
	D     string
	Style map[string]string
}

// Doc is what an SVG draws.
type Doc struct {
	Paths []Path
	Texts []string
}

// Parse reads every token of svg, failing t unless it is well-formed XML
// with an <svg> root.
func Parse(t testing.TB, svg []byte) Doc {
	t.Helper()
	var doc Doc
	inText := false
	for _, tok := range svgtest.Tokens(t, svg) {
		switch e := tok.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "path":
				a := svgtest.Attrs(e)
				p := Path{D: a["d"], Style: map[string]string{}}
				for _, prop := range strings.Split(a["style"], ";") {
					k, v, _ := strings.Cut(prop, ":")
					p.Style[strings.TrimSpace(k)] = strings.TrimSpace(v)
				}
				doc.Paths = append(doc.Paths, p)
			case "text":
				inText = true
				doc.Texts = append(doc.Texts, "")
			}
		case xml.EndElement:
			if e.Name.Local == "text" {
				inText = false
			}
		case xml.CharData:
			if inText {
				doc.Texts[len(doc.Texts)-1] += string(e)
			}
		}
	}
	return doc
}

// Lines counts the stroked, unfilled paths in colour c through at least
// minPoints points: the data lines of a series, where minPoints is above
// the two points of a legend entry's sample line.
func (d Doc) Lines(c color.RGBA, minPoints int) int {
	n := 0
	for _, p := range d.Paths {
		if p.Style["fill"] == "none" && strings.EqualFold(p.Style["stroke"], charts.Hex(c)) &&
			1+strings.Count(p.D, "L") >= minPoints {
			n++
		}
	}
	return n
}

// Fills counts the filled paths in colour c.
func (d Doc) Fills(c color.RGBA) int {
	n := 0
	for _, p := range d.Paths {
		if strings.EqualFold(p.Style["fill"], charts.Hex(c)) {
			n++
		}
	}
	return n
}

// HasText reports whether some <text> element reads s.
func (d Doc) HasText(s string) bool {
	for _, x := range d.Texts {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}
