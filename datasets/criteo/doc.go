// Package criteo reads the Criteo Kaggle display-advertising data set
// (train.txt of the Display Advertising Challenge) and the Criteo Terabyte
// click logs (day_0 … day_23) for DLRM training, the
// way facebookresearch/dlrm's data_utils.py and dlrm_data_pytorch.py
// prepare it, but streamed: dlrm converts the whole file into NumPy arrays
// in memory (and .npz files on disk) before training, while this package
// keeps O(vocabulary + batch) memory, whatever the number of lines: the
// per-line data (offset, length, label) lives on disk, in a sidecar beside
// each data file, and lines are read back with ReadAt when they are
// batched.
//
// A Kaggle line is a label, 13 integer features I1..I13 and 26 hashed
// categorical features C1..C26, tab-separated. Parsing follows dlrm:
// empty fields are 0, negative integers become 0 (x_int[x_int < 0] = 0),
// the dense input is log(x+1) in float32, categoricals are 32-bit hex
// (int(x, 16)) taken modulo --max-ind-range when that is positive, and
// each categorical value then maps to a dense id, numbered in order of
// first appearance, as dlrm's convertDicts do; a feature's number of
// distinct values (dlrm's counts) is its embedding table's row count.
//
// ScanFile makes the first pass over a file and returns an Index
// (dictionaries, counts, and a 12-byte record per good line: its offset,
// length and label). The records are streamed, as the lines are read,
// into a sidecar beside the file (train.txt.kiln-index, checksummed,
// written atomically), and the Index reads them from there on demand, so
// that its memory is the dictionaries alone; a later run with the file
// unchanged and the same options reuses the sidecar (after a streaming
// check of its checksum) instead of scanning again. Scan does the same
// for a stream, holding the records in memory (O(lines)), as ReadIndex
// does. KaggleSplit cuts the lines into dlrm's seven "days": six for
// training, the last halved into test and validation. An Order is a lazy
// sequence of lines: the training days with --data-sub-sample-rate applied
// (a negative line's keep-or-drop draw is a hash of the seed and its
// number) in the --data-randomize order (a keyed Feistel Permutation, so
// no list of lines is held), or plain test lines; Order.Batches yields
// dense [B,13] float32 inputs, one index per table per sample and labels,
// from any line on (a resumed epoch), with O(B) memory. Select, Shuffle
// and Batches do the same with an explicit slice of line numbers
// (8 bytes a line).
//
// A DaySet is the same over several files: OpenKaggle opens train.txt cut
// into KaggleSplit's days, OpenTerabyte the 24 Terabyte day files (dlrm's
// --raw-data-file prefix, or a directory holding day_0 … day_23), each
// scanned through its own sidecar, their dictionaries merged into one as
// dlrm counts values over all days. DaySplit gives days 0–22 to training
// and halves day 23 into test and validation.
//
// Bad lines (a field count other than 40, a label not 0 or 1, a
// non-integer integer field, a categorical that is not hex of at most 8
// digits) are *LineError values naming the file, line and field, matching
// errors.Is(err, ErrBadLine); dlrm would stop with a Python exception
// naming neither. With ScanOptions.SkipBadLines the scan counts them
// instead and keeps the first ten line numbers.
//
// Two generators stand in for the data where a test or benchmark needs no
// file. NewPlanted makes samples with a known signal: Zipf-distributed
// row ids for the first Tables categoricals, integer features that are
// sometimes empty or negative, and labels drawn from a logistic model of
// the dense inputs, a per-row effect of every id and one product of two
// tables' factors (the kind of interaction DLRM's dot product captures).
// Its Stats report the oracle AUC and log loss, those of the true
// probabilities, which a model that learns approaches. It writes Kaggle
// lines that Scan reads back (WriteTSV) or builds the same samples as
// Batch values directly, each sample a function of the seed and its
// number. NewRandom reproduces dlrm_s_pytorch.py's
// --data-generation=random: uniform dense inputs and targets, and bags of
// sorted distinct indices per table, sized by --num-indices-per-lookup;
// it carries no signal and serves timing and shape tests of any model.
// Given one Trace per table (ReadTrace reads dlrm's dist_emb_j.log files:
// unique accesses, stack distances and their cumulative distribution),
// Random becomes --data-generation=synthetic: each bag is a short access
// trace whose LRU stack distances follow the file's distribution.
package criteo
