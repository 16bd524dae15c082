// Package checkpoint writes and reads the checkpoints of Kiln's training
// programs so that a run survives being killed, preempted or corrupted on
// disk. A checkpoint is one safetensors file (readable by any safetensors
// reader) holding
//
//   - the program's tensors under its own names: model weights, optimizer
//     state;
//   - a progress record, any JSON value the program chooses, as the text of
//     a U8 tensor named RecordKey;
//   - a checksum of all of that: "sha256:" and the hex SHA-256, as the text
//     of a U8 tensor named ChecksumKey.
//
// Write replaces a checkpoint whole or not at all, whenever the process is
// killed (a killed write leaves only a temporary file beside the
// checkpoint, which RemoveStale deletes), and refuses tensors holding a
// NaN or an infinity, so a diverged run cannot replace a good checkpoint
// with a useless one. Read verifies the checksum before anything is used.
//
// TrainingTensors names a training run's model and optimizer state for
// Write; ReadWeights reads them back (or a plain state dict) and
// Weights.Restore puts the optimizer's and scheduler's state back.
package checkpoint

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

const (
	// RecordKey names the tensor holding the progress record.
	RecordKey = "kiln_checkpoint"
	// ChecksumKey names the tensor holding the checksum.
	ChecksumKey = "kiln_checkpoint_sha256"

	checksumPrefix = "sha256:"
)

// ErrChecksum is wrapped by the error of a checkpoint whose tensors do not
// hash to the checksum it records.
var ErrChecksum = errors.New("checksum mismatch")

// An Error is a checkpoint that cannot be used as it is: Field names what
// is wrong in File, a field of the progress record (such as "epoch_step")
// or a tensor (such as "optimizer.state.3.momentum_buffer").
type Error struct {
	File, Field string
	Err         error
}

func (e *Error) Error() string {
	return fmt.Sprintf("checkpoint %s: %s: %v", e.File, e.Field, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Write saves record and ts to path as a checkpoint. The file is written
// beside path, synced, renamed over it and the rename synced too (the
// directory), so after a crash path holds either the old checkpoint or the
// new one, whole. Nothing is written when a float tensor holds a NaN or an
// infinity: the error wraps a *kiln.NonFiniteError naming the tensor.
func Write(path string, record any, ts []nn.NamedTensor) error {
	if err := kiln.CheckFiniteTensors("tensor", ts); err != nil {
		return fmt.Errorf("checkpoint %s not written: %w", path, err)
	}
	js, err := json.Marshal(record)
	if err != nil {
		return fmt.Errorf("checkpoint %s not written: progress record: %w", path, err)
	}
	all := append([]nn.NamedTensor{{Name: RecordKey, Tensor: autograd.FromUint8(js, len(js))}}, ts...)
	sum := []byte(checksum(all))
	all = append(all, nn.NamedTensor{Name: ChecksumKey, Tensor: autograd.FromUint8(sum, len(sum))})
	if err := nn.SaveTensors(path, all); err != nil {
		return err
	}
	// The rename is durable only once the directory entry is.
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("checkpoint %s: syncing its folder: %w", path, err)
	}
	return nil
}

// Read reads the safetensors file at path. When it is a checkpoint (it has
// a progress record) Read checks its checksum, decodes the record into
// record (as json.Unmarshal does) and returns the other tensors with ok
// true. Any other safetensors file, such as a plain state dict, comes back
// whole with ok false and record untouched. Errors about the checkpoint
// are *Error values.
func Read(path string, record any) (ts []nn.NamedTensor, ok bool, err error) {
	all, err := nn.ReadTensors(path)
	if err != nil {
		return nil, false, err
	}
	rec, sum := find(all, RecordKey), find(all, ChecksumKey)
	switch {
	case rec < 0:
		return all, false, nil
	case sum < 0:
		return nil, true, &Error{path, ChecksumKey, errors.New("missing (written by an older Kiln, or not by Kiln)")}
	}
	text := func(i int) ([]byte, error) {
		if t := all[i].Tensor; t.DType() == autograd.Uint8 {
			return t.Uint8s(), nil
		}
		return nil, fmt.Errorf("stored as %v, want uint8 text", all[i].Tensor.DType())
	}
	want, err := text(sum)
	if err != nil {
		return nil, true, &Error{path, ChecksumKey, err}
	}
	rest := slices.Delete(slices.Clone(all), sum, sum+1)
	if got := checksum(rest); got != string(want) {
		return nil, true, &Error{path, ChecksumKey, fmt.Errorf("%w: the file records %q, its tensors hash to %s (a damaged or edited file)", ErrChecksum, want, got)}
	}
	js, err := text(rec)
	if err == nil {
		err = json.Unmarshal(js, record)
	}
	if err != nil {
		field := RecordKey
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			field = te.Field
		}
		return nil, true, &Error{path, field, err}
	}
	return slices.DeleteFunc(rest, func(nt nn.NamedTensor) bool { return nt.Name == RecordKey }), true, nil
}

func find(ts []nn.NamedTensor, name string) int {
	return slices.IndexFunc(ts, func(nt nn.NamedTensor) bool { return nt.Name == name })
}

// checksum hashes ts in name order: for each tensor its name, dtype, shape
// and values as the file stores and Read returns them (row-major, bfloat16
// widened to float32), each length-prefixed, so that neither bits flipped
// nor data swapped between tensors of one shape go unnoticed.
func checksum(ts []nn.NamedTensor) string {
	ts = slices.SortedFunc(slices.Values(ts), func(a, b nn.NamedTensor) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	var buf []byte
	for _, nt := range ts {
		t := nt.Tensor
		if t.Format() != autograd.Contiguous {
			t = t.Detach().Contiguous()
		}
		if t.DType() == autograd.BFloat16 {
			t = autograd.Cast(t.Detach(), autograd.Float32)
		}
		buf = binary.AppendUvarint(buf[:0], uint64(len(nt.Name)))
		buf = append(buf, nt.Name...)
		buf = append(buf, t.DType().String()...)
		buf = binary.AppendUvarint(buf, uint64(t.NDim()))
		for _, d := range t.Shape() {
			buf = binary.AppendUvarint(buf, uint64(d))
		}
		buf = binary.AppendUvarint(buf, uint64(t.Numel()))
		h.Write(buf)
		hashValues(h, t, buf)
	}
	return checksumPrefix + hex.EncodeToString(h.Sum(nil))
}

// hashValues writes t's elements to h little-endian, through buf a block
// at a time.
func hashValues(h io.Writer, t *autograd.Tensor, buf []byte) {
	const block = 8192
	n := t.Numel()
	for lo := 0; lo < n; lo += block {
		buf = appendValues(buf[:0], t.Data(), lo, min(lo+block, n))
		h.Write(buf)
	}
}

func appendValues(b []byte, data any, lo, hi int) []byte {
	le := binary.LittleEndian
	switch v := data.(type) {
	case []float32:
		for _, x := range v[lo:hi] {
			b = le.AppendUint32(b, math.Float32bits(x))
		}
	case []int64:
		for _, x := range v[lo:hi] {
			b = le.AppendUint64(b, uint64(x))
		}
	case []int32:
		for _, x := range v[lo:hi] {
			b = le.AppendUint32(b, uint32(x))
		}
	case []int8:
		for _, x := range v[lo:hi] {
			b = append(b, byte(x))
		}
	case []uint8:
		b = append(b, v[lo:hi]...)
	}
	return b
}

// RemoveStale removes the temporary files that writes of the checkpoint
// path left behind when they were killed, and returns their paths. Only
// files named as the writer names its temporary files for path (beside
// it: ".NAME.tmp" and digits) are touched; call it before the run writes
// path, as one process at most writes a checkpoint at a time.
func RemoveStale(path string) ([]string, error) {
	dir, prefix := filepath.Dir(path), "."+filepath.Base(path)+".tmp"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	var removed []string
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		stale := filepath.Join(dir, e.Name())
		if err := os.Remove(stale); err != nil {
			return removed, fmt.Errorf("checkpoint %s: removing a stale temporary file: %w", path, err)
		}
		removed = append(removed, stale)
	}
	return removed, nil
}

// MissingState returns the numbers of the parameters of sd that have no
// state tensor called name, such as "momentum_buffer" for an SGD with
// momentum that has taken a step, where every parameter must have one.
func MissingState(sd *optim.StateDict, name string) []int {
	var missing []int
	for _, g := range sd.Groups {
		for _, id := range g.Params {
			if sd.State[id][name] == nil {
				missing = append(missing, id)
			}
		}
	}
	return missing
}
