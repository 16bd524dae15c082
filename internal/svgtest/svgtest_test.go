package svgtest

import (
	"encoding/xml"
	"testing"
)

func TestTokens(t *testing.T) {
	toks := Tokens(t, []byte(`<svg width="2"><rect x="1" class="node"/><text>hi</text></svg>`))
	var rects int
	for _, tok := range toks {
		if e, ok := tok.(xml.StartElement); ok && e.Name.Local == "rect" {
			rects++
			if a := Attrs(e); a["x"] != "1" || a["class"] != "node" {
				t.Errorf("attributes %v", a)
			}
		}
	}
	if rects != 1 || len(toks) != 7 {
		t.Errorf("%d rects in %d tokens, want 1 in 7", rects, len(toks))
	}
}
