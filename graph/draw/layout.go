package draw

import (
	"cmp"
	"math"
	"slices"
	"unicode/utf8"
)

// Sizes of the SVG drawing, in pixels. The labels are set in a monospace
// font, whose advance is 0.6 em, so a line's width is known without font
// metrics.
const (
	fontSize   = 12.0
	charWidth  = 0.61 * fontSize // a little over 0.6 em, for bold
	lineHeight = 15.0
	padX       = 10.0 // inside a box, left and right of the text
	padY       = 6.0  // inside a box, above and below the text
	boxGap     = 28.0 // between two boxes of a layer
	dummyGap   = 14.0 // between an edge passing a layer and its neighbours
	layerGap   = 40.0 // between the bottom of one layer and the top of the next
	portGap    = 12.0 // between edges leaving or entering a box side by side
	dummyW     = 2.0  // the width an edge passing a layer takes up
)

// Weights of a box and of an edge passing a layer when a layer's positions
// are fitted to the positions its neighbours want: the boxes of a chain
// stay in line and a passing edge moves aside.
const (
	boxWeight   = 1.0
	dummyWeight = 0.02
)

// lnode is one place in a layer: a box, or a dummy, the point where an
// edge crosses a layer between its ends.
type lnode struct {
	box      int // index in drawing.boxes; -1 for a dummy
	layer    int
	w, h     float64
	x        float64 // centre
	up, down []int   // lnodes of the layers above and below joined to this one
}

func (n *lnode) weight() float64 {
	if n.box < 0 {
		return dummyWeight
	}
	return boxWeight
}

// layout is a drawing laid out: lnodes 0..len(boxes)-1 are the boxes, the
// rest dummies; each edge's route runs through lnodes on consecutive
// layers.
type layout struct {
	nodes  []lnode
	layers [][]int      // lnodes of each layer, left to right
	routes [][]int      // per drawing edge: from box, dummies, to box
	layerY []float64    // top of each layer's band
	layerH []float64    // height of each layer's band
	ports  [][2]float64 // per edge: x where it leaves its source and enters its target
}

// boxSize is the size of a box holding lines.
func boxSize(lines []line) (w, h float64) {
	chars := 0
	for _, l := range lines {
		chars = max(chars, utf8.RuneCountInString(l.text))
	}
	return float64(chars)*charWidth + 2*padX, float64(len(lines))*lineHeight + 2*padY
}

// newLayout lays d out with its top left corner at (0, top).
func newLayout(d *drawing, top float64) *layout {
	lay := &layout{}
	layer := assignLayers(d)
	for i, b := range d.boxes {
		w, h := boxSize(b.lines)
		lay.nodes = append(lay.nodes, lnode{box: i, layer: layer[i], w: w, h: h})
	}
	for _, e := range d.edges {
		route := []int{e.from}
		for l := layer[e.from] + 1; l < layer[e.to]; l++ {
			lay.nodes = append(lay.nodes, lnode{box: -1, layer: l, w: dummyW})
			route = append(route, len(lay.nodes)-1)
		}
		route = append(route, e.to)
		for i := 1; i < len(route); i++ {
			a, b := route[i-1], route[i]
			lay.nodes[a].down = append(lay.nodes[a].down, b)
			lay.nodes[b].up = append(lay.nodes[b].up, a)
		}
		lay.routes = append(lay.routes, route)
	}
	depth := slices.Max(append(layer, 0)) + 1
	lay.layers = make([][]int, depth)
	for i, n := range lay.nodes {
		lay.layers[n.layer] = append(lay.layers[n.layer], i)
	}
	lay.order()
	lay.place()
	lay.stack(top)
	lay.assignPorts()
	return lay
}

// assignLayers puts each box one layer below the deepest box it reads
// from (longest-path layering), then moves a box that reads nothing but
// constants down to just above the first box that reads it, and an
// output that nothing draws an edge to to the bottom layer.
func assignLayers(d *drawing) []int {
	preds := make([][]int, len(d.boxes))
	succs := make([][]int, len(d.boxes))
	for _, e := range d.edges {
		preds[e.to] = append(preds[e.to], e.from)
		succs[e.from] = append(succs[e.from], e.to)
	}
	layer := make([]int, len(d.boxes))
	// Edges run from lower to higher box indices: inputs, nodes in
	// execution order, outputs.
	for i := range d.boxes {
		for _, p := range preds[i] {
			layer[i] = max(layer[i], layer[p]+1)
		}
	}
	for i := len(d.boxes) - 1; i >= 0; i-- {
		if d.boxes[i].kind == opBox && len(preds[i]) == 0 && len(succs[i]) > 0 {
			low := math.MaxInt
			for _, s := range succs[i] {
				low = min(low, layer[s])
			}
			layer[i] = low - 1
		}
	}
	bottom := slices.Max(append(slices.Clone(layer), 0))
	for i, b := range d.boxes {
		if b.kind == outputBox && len(preds[i]) == 0 {
			layer[i] = bottom
		}
	}
	return layer
}

// order orders each layer by barycentre sweeps, down and up, keeping the
// order with the fewest crossings.
func (lay *layout) order() {
	best := cloneLayers(lay.layers)
	fewest := lay.crossings()
	for sweep := 0; sweep < 24 && fewest > 0; sweep++ {
		down := sweep%2 == 0
		for k := range lay.layers {
			l := k
			if !down {
				l = len(lay.layers) - 1 - k
			}
			lay.sortLayer(l, down)
		}
		if c := lay.crossings(); c < fewest {
			fewest, best = c, cloneLayers(lay.layers)
		}
	}
	lay.layers = best
}

func cloneLayers(layers [][]int) [][]int {
	c := make([][]int, len(layers))
	for i, l := range layers {
		c[i] = slices.Clone(l)
	}
	return c
}

// positions returns each lnode's index in its layer.
func (lay *layout) positions() []int {
	pos := make([]int, len(lay.nodes))
	for _, l := range lay.layers {
		for i, n := range l {
			pos[n] = i
		}
	}
	return pos
}

// sortLayer sorts layer l by the mean position of each lnode's neighbours
// in the layer above (down) or below; one with none keeps its place.
func (lay *layout) sortLayer(l int, down bool) {
	pos := lay.positions()
	bary := map[int]float64{}
	for i, n := range lay.layers[l] {
		nb := lay.nodes[n].down
		if down {
			nb = lay.nodes[n].up
		}
		if len(nb) == 0 {
			bary[n] = float64(i)
			continue
		}
		sum := 0.0
		for _, m := range nb {
			sum += float64(pos[m])
		}
		bary[n] = sum / float64(len(nb))
	}
	slices.SortStableFunc(lay.layers[l], func(a, b int) int { return cmp.Compare(bary[a], bary[b]) })
}

// crossings counts the pairs of segments between adjacent layers that
// cross.
func (lay *layout) crossings() int {
	pos := lay.positions()
	total := 0
	for _, l := range lay.layers {
		var segs [][2]int
		for _, n := range l {
			for _, m := range lay.nodes[n].down {
				segs = append(segs, [2]int{pos[n], pos[m]})
			}
		}
		for i := range segs {
			for j := i + 1; j < len(segs); j++ {
				if (segs[i][0]-segs[j][0])*(segs[i][1]-segs[j][1]) < 0 {
					total++
				}
			}
		}
	}
	return total
}

// gap is the space between lnodes a and b side by side in a layer.
func (lay *layout) gap(a, b int) float64 {
	if lay.nodes[a].box < 0 || lay.nodes[b].box < 0 {
		return dummyGap
	}
	return boxGap
}

// place sets each lnode's x: each layer packed left to right at first,
// then fitted, a layer at a time, to where its neighbours pull it, in
// sweeps down (pulled by the layer above), up, and finally both ways.
func (lay *layout) place() {
	for _, l := range lay.layers {
		x := 0.0
		for i, n := range l {
			if i > 0 {
				x += lay.nodes[l[i-1]].w/2 + lay.gap(l[i-1], n) + lay.nodes[n].w/2
			}
			lay.nodes[n].x = x
		}
	}
	const sweeps = 16
	for sweep := 0; sweep < sweeps; sweep++ {
		// Sweeping down, each layer is pulled by the one above it.
		fromAbove, fromBelow := sweep%2 == 0, sweep%2 == 1
		if sweep >= sweeps-4 {
			fromAbove, fromBelow = true, true
		}
		for k := range lay.layers {
			l := k
			if !fromAbove {
				l = len(lay.layers) - 1 - k
			}
			lay.fitLayer(l, fromAbove, fromBelow)
		}
	}
	left := math.Inf(1)
	for _, n := range lay.nodes {
		left = min(left, n.x-n.w/2)
	}
	for i := range lay.nodes {
		lay.nodes[i].x -= left
	}
}

// fitLayer moves layer l's lnodes, keeping their order and gaps, to the
// positions nearest (least squares, weighted by lnode weight) to the
// weighted mean x of their neighbours above (up) and below (down).
func (lay *layout) fitLayer(l int, up, down bool) {
	nodes := lay.layers[l]
	// With offset[i] the least distance from the first lnode to lnode i,
	// y[i] = x[i]-offset[i] must not decrease: an isotonic regression of
	// the wanted y, solved by pooling adjacent violators.
	type block struct {
		sum, weight float64
		n           int
	}
	var blocks []block
	offset := 0.0
	for i, n := range nodes {
		if i > 0 {
			offset += lay.nodes[nodes[i-1]].w/2 + lay.gap(nodes[i-1], n) + lay.nodes[n].w/2
		}
		want := lay.pull(n, up, down)
		w := lay.nodes[n].weight()
		blocks = append(blocks, block{(want - offset) * w, w, 1})
		for len(blocks) > 1 {
			a, b := blocks[len(blocks)-2], blocks[len(blocks)-1]
			if a.sum/a.weight <= b.sum/b.weight {
				break
			}
			blocks = append(blocks[:len(blocks)-2], block{a.sum + b.sum, a.weight + b.weight, a.n + b.n})
		}
	}
	i := 0
	offset = 0
	for _, b := range blocks {
		y := b.sum / b.weight
		for k := 0; k < b.n; k++ {
			if i > 0 {
				offset += lay.nodes[nodes[i-1]].w/2 + lay.gap(nodes[i-1], nodes[i]) + lay.nodes[nodes[i]].w/2
			}
			lay.nodes[nodes[i]].x = y + offset
			i++
		}
	}
}

// pull is the x lnode n's neighbours above (up) and below (down) want it
// at: their mean weighted by their weights, or where it is when it has no
// such neighbours.
func (lay *layout) pull(n int, up, down bool) float64 {
	sum, weight := 0.0, 0.0
	add := func(nb []int) {
		for _, m := range nb {
			w := lay.nodes[m].weight()
			sum += lay.nodes[m].x * w
			weight += w
		}
	}
	if up {
		add(lay.nodes[n].up)
	}
	if down {
		add(lay.nodes[n].down)
	}
	if weight == 0 {
		return lay.nodes[n].x
	}
	return sum / weight
}

// stack sets the layers' bands one below the other from top.
func (lay *layout) stack(top float64) {
	lay.layerY = make([]float64, len(lay.layers))
	lay.layerH = make([]float64, len(lay.layers))
	y := top
	for l, nodes := range lay.layers {
		for _, n := range nodes {
			lay.layerH[l] = max(lay.layerH[l], lay.nodes[n].h)
		}
		lay.layerY[l] = y
		y += lay.layerH[l] + layerGap
	}
}

// rect returns the top left corner and size of box b.
func (lay *layout) rect(b int) (x, y, w, h float64) {
	n := &lay.nodes[b]
	return n.x - n.w/2, lay.layerY[n.layer] + (lay.layerH[n.layer]-n.h)/2, n.w, n.h
}

// assignPorts spreads the edges that leave a box along its bottom, and
// those that enter it along its top, in the order of the x they come from
// or go to, so that they do not cross at the box.
func (lay *layout) assignPorts() {
	lay.ports = make([][2]float64, len(lay.routes))
	outs := make([][]int, len(lay.nodes))
	ins := make([][]int, len(lay.nodes))
	for e, r := range lay.routes {
		outs[r[0]] = append(outs[r[0]], e)
		ins[r[len(r)-1]] = append(ins[r[len(r)-1]], e)
	}
	spread := func(b int, edges []int, side int, toward func(e int) int) {
		slices.SortStableFunc(edges, func(e, f int) int {
			return cmp.Compare(lay.nodes[toward(e)].x, lay.nodes[toward(f)].x)
		})
		n := &lay.nodes[b]
		step := min(portGap, (n.w-2*padX)/float64(max(len(edges)-1, 1)))
		for i, e := range edges {
			lay.ports[e][side] = n.x + (float64(i)-float64(len(edges)-1)/2)*step
		}
	}
	for b := range lay.nodes {
		spread(b, outs[b], 0, func(e int) int { return lay.routes[e][1] })
		spread(b, ins[b], 1, func(e int) int { r := lay.routes[e]; return r[len(r)-2] })
	}
}

// bounds returns the right and bottom edges of everything laid out.
func (lay *layout) bounds() (right, bottom float64) {
	for _, n := range lay.nodes {
		right = max(right, n.x+n.w/2)
	}
	if l := len(lay.layers) - 1; l >= 0 {
		bottom = lay.layerY[l] + lay.layerH[l]
	}
	return right, bottom
}
