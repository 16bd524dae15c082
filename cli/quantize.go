package cli

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/graph/quant"
	"github.com/kilnml/kiln/internal/feed"
	"github.com/kilnml/kiln/internal/npy"
)

const quantizeSynopsis = "FILE (--calib IN.npy[,IN2.npy...] [--calib ...] [--symmetric] [--algorithm A] [--conf-out CONF.json] | --conf CONF.json) -o OUT.kiln"

// quantizeCmd converts a float32 graph to int8: it calibrates the graph
// on .npy batches, or takes a conf calibrated earlier, and saves the
// converted graph.
func quantizeCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("quantize", quantizeSynopsis, stderr)
	var calib listFlag
	fs.Var(&calib, "calib", "calibration batch: one .npy `file` per graph input, comma-separated in input order; repeat for more batches")
	confIn := fs.String("conf", "", "quantization conf `file` (IPEX JSON) to convert with, instead of calibrating")
	confOut := fs.String("conf-out", "", "write the calibrated conf to `file` (IPEX JSON), for a later --conf")
	symmetric := fs.Bool("symmetric", false, "calibrate int8 activations with zero point 0 (default: uint8 activations with a zero point from the range)")
	algorithm := fs.String("algorithm", "", "range observer: min_max (default), moving_averager_min_max or histogram")
	out := fs.String("o", "", "the int8 graph's `file` (required)")
	path, err := parseFile(fs, args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *out == "":
		return usagef("missing -o OUT.kiln, the file for the int8 graph")
	case len(calib) == 0 && *confIn == "":
		return usagef("give --calib IN.npy (calibration batches) or --conf CONF.json (a calibrated conf)")
	case len(calib) > 0 && *confIn != "":
		return usagef("--calib and --conf exclude each other: calibrate, or convert with a conf calibrated before")
	case *confIn != "" && (set["symmetric"] || set["algorithm"] || set["conf-out"]):
		return usagef("--symmetric, --algorithm and --conf-out set up a calibration; with --conf %s the conf decides", *confIn)
	case sameFile(*out, path):
		return usagef("-o %s would overwrite the float32 graph", *out)
	case *confOut != "" && sameFile(*confOut, *out):
		return usagef("--conf-out and -o are both %s", *out)
	}
	if *algorithm != "" {
		if _, err := quant.NewObserver(*algorithm); err != nil {
			return usagef("--algorithm %s: %v", *algorithm, err)
		}
	}

	g, err := graph.Load(path)
	if err != nil {
		return err
	}
	var conf *quant.Conf
	if *confIn != "" {
		if conf, err = quant.LoadConf(*confIn); err != nil {
			return err
		}
	} else {
		batches, err := splitCalib(g, path, calib)
		if err != nil {
			return err
		}
		scheme := quant.PerTensorAffine
		if *symmetric {
			scheme = quant.PerTensorSymmetric
		}
		conf = quant.NewConf(scheme)
		if *algorithm != "" {
			conf.Algorithm = *algorithm
		}
		if err := calibrate(g, path, conf, batches); err != nil {
			return err
		}
		if *confOut != "" {
			if err := conf.Save(*confOut); err != nil {
				return err
			}
		}
	}
	q, err := quant.Convert(g, conf)
	if err != nil {
		from := ""
		if *confIn != "" {
			from = " with " + *confIn
		}
		return fmt.Errorf("converting %s%s: %w", path, from, err)
	}
	if err := graph.Save(*out, q); err != nil {
		return err
	}
	s := int8Summary(q)
	note := fmt.Sprintf("calibrated on %d batch(es)", len(calib))
	switch {
	case *confIn != "":
		note = "conf " + *confIn
	case *confOut != "":
		note += ", conf written to " + *confOut
	}
	fmt.Fprintf(stdout, "wrote %s: %d ops recorded, %d int8 layer nodes, %d int8 weights (%s)\n",
		*out, len(conf.Ops), s.layers, s.weights, note)
	return nil
}

// splitCalib checks the --calib values against g's inputs and returns
// each batch's files, in input order.
func splitCalib(g *graph.Graph, path string, calib []string) ([][]string, error) {
	batches := make([][]string, len(calib))
	for i, c := range calib {
		files := strings.Split(c, ",")
		if len(files) != len(g.Inputs) {
			return nil, usagef("--calib %s: %s takes %d input(s) (%s), so each --calib wants %d comma-separated .npy files, got %d",
				c, path, len(g.Inputs), valueList(g, g.Inputs), len(g.Inputs), len(files))
		}
		if slices.Contains(files, "") {
			return nil, usagef("--calib %s: empty file name", c)
		}
		batches[i] = files
	}
	return batches, nil
}

// calibrate fills conf from g's ranges on batches. The graph is checked
// (Prepare) before any file is read, so that a graph that cannot be
// quantized is reported as such rather than through its inputs.
func calibrate(g *graph.Graph, path string, conf *quant.Conf, batches [][]string) error {
	cal, err := quant.Prepare(g, conf)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for b, files := range batches {
		inputs := make([]*autograd.Tensor, len(files))
		for i, file := range files {
			x, err := npy.Read(file)
			if err != nil {
				return fmt.Errorf("--calib batch %d: %w", b+1, err)
			}
			if x, err = feed.Conform(x, g.Values[g.Inputs[i]]); err != nil {
				return fmt.Errorf("--calib batch %d, input %d (%s): %w", b+1, i, file, err)
			}
			inputs[i] = x
		}
		if err := cal.Observe(inputs...); err != nil {
			return fmt.Errorf("--calib batch %d (%s) on %s: %w", b+1, strings.Join(files, ","), path, err)
		}
	}
	if err := cal.Finish(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// sameFile reports whether two paths name one file, as far as their
// cleaned absolute forms tell.
func sameFile(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// int8Stats describes the quantization of a converted graph.
type int8Stats struct {
	layers      int            // int8 layer nodes
	byLayer     map[string]int // int8 layer nodes by layer: Conv2d, Linear
	weights     int            // int8 constants
	weightBytes int
	quantizes   int              // Quantize nodes
	activations []autograd.DType // the 8-bit dtypes computed values have, in order
}

// int8Summary gathers the int8 parts of g; for a float32 or bfloat16
// graph they are all zero.
func int8Summary(g *graph.Graph) int8Stats {
	s := int8Stats{byLayer: map[string]int{}}
	for _, n := range g.Nodes {
		// An int8 layer node is named by the chain it replaced, which
		// starts at the Dequantize of its 8-bit input.
		if parts := strings.Split(n.Op, graph.FusedSep); len(parts) > 1 && parts[0] == "Dequantize" {
			s.layers++
			s.byLayer[parts[1]]++
		}
		if n.Op == "Quantize" {
			s.quantizes++
		}
	}
	for id, c := range g.Consts {
		if g.Values[id].DType == autograd.Int8 {
			s.weights++
			s.weightBytes += c.Numel() * c.DType().Size()
		}
	}
	for id, v := range g.Values {
		if (v.DType == autograd.Uint8 || v.DType == autograd.Int8) && !g.IsConst(id) && !slices.Contains(s.activations, v.DType) {
			s.activations = append(s.activations, v.DType)
		}
	}
	slices.SortFunc(s.activations, func(a, b autograd.DType) int { return cmp.Compare(a.String(), b.String()) })
	return s
}
