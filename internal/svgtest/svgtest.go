// Package svgtest reads SVG pictures back in tests: every XML token, the
// document checked to be well-formed with an <svg> root. Each test then
// looks for what its own drawing should hold (boxes, edges, series).
package svgtest

import (
	"bytes"
	"encoding/xml"
	"io"
	"testing"
)

// Tokens returns every token of svg (copied: they outlive the decoder),
// failing t unless svg is well-formed XML whose root element is <svg>.
func Tokens(t testing.TB, svg []byte) []xml.Token {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var toks []xml.Token
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if e, ok := tok.(xml.StartElement); ok && root == "" {
			root = e.Name.Local
		}
		toks = append(toks, xml.CopyToken(tok))
	}
	if root != "svg" {
		t.Fatalf("SVG root element is <%s>, want <svg>", root)
	}
	return toks
}

// Attrs returns an element's attributes by local name.
func Attrs(e xml.StartElement) map[string]string {
	m := make(map[string]string, len(e.Attr))
	for _, a := range e.Attr {
		m[a.Name.Local] = a.Value
	}
	return m
}
