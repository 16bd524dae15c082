// Package quant holds the parts of Kiln's INT8 post-training quantization
// that do not depend on a graph: the quantization configuration, the rule
// that turns a calibrated range into a scale and zero point, and the
// observers that calibrate ranges. It follows Intel Extension for PyTorch
// 1.10, so that a conf calibrated by either can be read by the other.
//
// Calibration runs in five steps. Prepare records the ops of a traced graph
// that can run in INT8 and attaches an observer to each of their inputs
// and outputs. Observe runs the graph on calibration batches, each observer
// folding the values it sees into a range (NewObserver: the running min and
// max, their moving average, or PyTorch's histogram search, which trims
// outliers). Finish turns each range into Params (ChooseParams) and each
// weight into per-channel scales (WeightScales), and fills one OpConf per
// recorded op. Save and LoadConf store and reload that Conf as IPEX's JSON
// file, checked entry by entry on reading. Convert then rewrites the graph
// to quantize, run and dequantize with the conf's parameters.
//
// The graph-facing steps (Prepare, Observe, Finish, Convert) are built on
// the conf, parameters and observers defined here.
package quant
