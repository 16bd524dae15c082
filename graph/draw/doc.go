// Package draw draws a graph.Graph as Graphviz DOT or as a laid-out SVG.
//
// Both drawings show the same boxes. Each of the graph's nodes is one box
// labelled with its op (a fused op under its fused pattern's name,
// "Conv2d+Add+ReLU", with a thick border), the module scope it was traced
// in, a summary of the constants it reads ("weight 64×3×7×7 f32": weights
// are summarised, never dumped) and the shape and dtype of each result.
// The graph's inputs are boxes of their own at the top, its outputs boxes
// at the bottom, and an edge runs from each box that makes a value to each
// box that reads it.
//
// A box is filled by the dtype of its (first) result, so a mixed-precision
// or quantized graph shows where the precision changes:
//
//	float32   light blue   #dbeafe
//	bfloat16  amber        #fde68a
//	int8      green        #bbf7d0
//	uint8     lilac        #e9d5ff
//	int32, int64 and others  grey  #e5e7eb
//
// Both drawings carry a legend of the dtypes the graph holds.
//
// DOT writes text for Graphviz (dot -Tsvg) to lay out. SVG lays the graph
// out itself, in pure Go, so no Graphviz is needed: a layered (Sugiyama)
// layout with the inputs at the top, each box on the layer below the
// deepest box it reads from (longest-path layering), an edge that skips
// layers (a ResNet's residual sum) routed through a point on each layer
// it crosses so that it stays visible beside the main path, the boxes of
// each layer ordered by barycentre sweeps to cut crossings, and placed as
// close to the boxes they connect to as the layer leaves room for.
package draw
