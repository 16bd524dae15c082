package nn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/internal/tensorcodec"
)

// StateDict lists m's parameters and buffers under their dotted PyTorch
// names in PyTorch's state_dict order: each module's parameters, then its
// buffers, then its children's entries. The tensors are m's own (not
// copies).
func StateDict(m Module) []NamedTensor {
	var out []NamedTensor
	walkModules(m, "", func(prefix string, b *Base) {
		for _, p := range b.params {
			out = append(out, NamedTensor{join(prefix, p.name), p.val})
		}
		for _, s := range b.buffers {
			out = append(out, NamedTensor{join(prefix, s.name), s.val})
		}
	})
	return out
}

// SaveStateDict writes m's state dict to path as safetensors, atomically
// (a reader never sees a half-written file). Tensors are stored in logical
// row-major (NCHW) order whatever their memory format, BFloat16 tensors as
// F32, so PyTorch's load_state_dict reads the file unchanged.
func SaveStateDict(m Module, path string) error {
	return SaveTensors(path, StateDict(m))
}

// SaveTensors writes named tensors to path as SaveStateDict does. It is for
// callers that assemble their own list, such as checkpoints or mixed
// precision code that saves joined FP32 master weights.
func SaveTensors(path string, ts []NamedTensor) error {
	f := &safetensors.File{Metadata: map[string]string{"format": "pt"}}
	for _, nt := range ts {
		e, err := encodeTensor(nt.Name, nt.Tensor)
		if err != nil {
			return fileError("saving", path, nt.Name, err)
		}
		f.Tensors = append(f.Tensors, e)
	}
	if err := safetensors.WriteFile(path, f); err != nil {
		return fileError("saving", path, "", err)
	}
	return nil
}

func encodeTensor(name string, t *autograd.Tensor) (safetensors.Tensor, error) {
	if t == nil {
		return safetensors.Tensor{}, errors.New("the tensor is nil")
	}
	if t.Format() != autograd.Contiguous {
		t = t.Detach().Contiguous()
	}
	e := safetensors.Tensor{Name: name, Shape: t.Shape()}
	switch t.DType() {
	case autograd.Float32, autograd.BFloat16:
		v := autograd.Cast(t.Detach(), autograd.Float32).Float32s()
		e.DType, e.Data = "F32", make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(e.Data[4*i:], math.Float32bits(x))
		}
	case autograd.Int64:
		v := t.Int64s()
		e.DType, e.Data = "I64", make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(e.Data[8*i:], uint64(x))
		}
	case autograd.Int32:
		v := t.Int32s()
		e.DType, e.Data = "I32", make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(e.Data[4*i:], uint32(x))
		}
	case autograd.Int8:
		v := t.Int8s()
		e.DType, e.Data = "I8", make([]byte, len(v))
		for i, x := range v {
			e.Data[i] = byte(x)
		}
	case autograd.Uint8:
		e.DType, e.Data = "U8", append([]byte(nil), t.Uint8s()...)
	default:
		return e, fmt.Errorf("unsupported dtype %v", t.DType())
	}
	return e, nil
}

// ReadTensors reads every tensor of a safetensors file, in the file's
// order, without loading them into a module: for programs that sort a
// checkpoint's entries themselves or inspect a state dict. Errors are
// *FileError, naming the file and, for a tensor that cannot be decoded, the
// tensor.
func ReadTensors(path string) ([]NamedTensor, error) {
	f, err := readSafetensors("", path)
	if err != nil {
		return nil, err
	}
	ts := make([]NamedTensor, 0, len(f.Tensors))
	for _, e := range f.Tensors {
		t, err := tensorcodec.Decode(e)
		if err != nil {
			return nil, fileError("", path, e.Name, err)
		}
		ts = append(ts, NamedTensor{Name: e.Name, Tensor: t})
	}
	return ts, nil
}

// LoadOptions configures LoadStateDict and LoadTensors.
type LoadOptions struct {
	// NonStrict ignores missing and unexpected keys, like
	// load_state_dict(strict=False). Shape and dtype mismatches are errors
	// either way, as in PyTorch.
	NonStrict bool
}

// StateDictError lists every problem found while loading a state dict, the
// way PyTorch's load_state_dict reports them together.
type StateDictError struct {
	// Path is the file loaded, or "" for LoadTensors.
	Path string
	// Missing holds model keys the state dict lacks; Unexpected holds
	// state-dict keys the model lacks (both empty when NonStrict).
	Missing, Unexpected []string
	// Mismatches describes each key whose shape or dtype does not fit.
	Mismatches []string
}

func (e *StateDictError) Error() string {
	var b strings.Builder
	b.WriteString("nn: ")
	if e.Path != "" {
		fmt.Fprintf(&b, "%s: ", e.Path)
	}
	b.WriteString("error(s) in loading state dict:")
	quoted := func(keys []string) string {
		q := make([]string, len(keys))
		for i, k := range keys {
			q[i] = fmt.Sprintf("%q", k)
		}
		return strings.Join(q, ", ")
	}
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, "\n\tmissing key(s) in state dict: %s", quoted(e.Missing))
	}
	if len(e.Unexpected) > 0 {
		fmt.Fprintf(&b, "\n\tunexpected key(s) in state dict: %s", quoted(e.Unexpected))
	}
	for _, m := range e.Mismatches {
		b.WriteString("\n\t")
		b.WriteString(m)
	}
	return b.String()
}

// source is one tensor offered for loading: decode yields it as a Kiln
// tensor, and dtype names its stored type for messages.
type source struct {
	dtype  string
	shape  []int
	decode func() (*autograd.Tensor, error)
}

// LoadStateDict reads a safetensors state dict from path into m's
// parameters and buffers, matching them by name like PyTorch's
// load_state_dict (strict unless opt says otherwise). Values are copied into
// the existing tensors, so their memory format (channels-last stays
// channels-last) and identity (optimizers holding them keep working) are
// kept.
//
// Floating-point entries (F32, F64, F16, BF16) load into float32 or
// bfloat16 tensors with conversion, as PyTorch's copy_ does; integer
// entries (I64, I32, I8, U8) load into integer tensors the same way. A
// float entry for an integer tensor or the reverse is a dtype mismatch.
// Every problem found is reported in one *StateDictError and nothing is
// loaded unless all keys fit. A file that cannot be read or decoded gives a
// *FileError wrapping the codec's error (with the byte offset for truncated
// files or bad headers).
func LoadStateDict(m Module, path string, opt ...LoadOptions) error {
	f, err := readSafetensors("loading state dict", path)
	if err != nil {
		return err
	}
	srcs := map[string]source{}
	for _, e := range f.Tensors {
		srcs[e.Name] = source{dtype: e.DType, shape: e.Shape, decode: func() (*autograd.Tensor, error) { return tensorcodec.Decode(e) }}
	}
	return load(m, path, srcs, opt)
}

// LoadTensors loads named tensors (for example from a checkpoint) into m
// exactly as LoadStateDict loads a file.
func LoadTensors(m Module, ts []NamedTensor, opt ...LoadOptions) error {
	srcs := map[string]source{}
	for _, nt := range ts {
		t := nt.Tensor
		if t == nil {
			Fail(autograd.ErrArgument, "LoadTensors", "tensor %q is nil", nt.Name)
		}
		srcs[nt.Name] = source{dtype: t.DType().String(), shape: t.Shape(), decode: func() (*autograd.Tensor, error) { return t, nil }}
	}
	return load(m, "", srcs, opt)
}

func load(m Module, path string, srcs map[string]source, opts []LoadOptions) error {
	var opt LoadOptions
	if len(opts) > 0 {
		opt = opts[len(opts)-1]
	}
	e := &StateDictError{Path: path}
	type pending struct {
		dst, src *autograd.Tensor
	}
	var todo []pending
	used := map[string]bool{}
	for _, nt := range StateDict(m) {
		s, ok := srcs[nt.Name]
		if !ok {
			if !opt.NonStrict {
				e.Missing = append(e.Missing, nt.Name)
			}
			continue
		}
		used[nt.Name] = true
		dst := nt.Tensor
		if fmt.Sprint(s.shape) != fmt.Sprint(dst.Shape()) {
			e.Mismatches = append(e.Mismatches, fmt.Sprintf("size mismatch for %s: copying a tensor with shape %v from the state dict, the shape in the current model is %v", nt.Name, s.shape, dst.Shape()))
			continue
		}
		kind, known := dtypeKind(s.dtype)
		if !known {
			e.Mismatches = append(e.Mismatches, fmt.Sprintf("unsupported dtype for %s: the state dict holds %s", nt.Name, s.dtype))
			continue
		}
		if kind != dst.DType().IsFloat() {
			e.Mismatches = append(e.Mismatches, fmt.Sprintf("dtype mismatch for %s: the state dict holds %s, the current model has %v", nt.Name, s.dtype, dst.DType()))
			continue
		}
		src, err := s.decode()
		if err != nil {
			e.Mismatches = append(e.Mismatches, fmt.Sprintf("cannot decode %s: %v", nt.Name, err))
			continue
		}
		todo = append(todo, pending{dst, src})
	}
	if !opt.NonStrict {
		for name := range srcs {
			if !used[name] {
				e.Unexpected = append(e.Unexpected, name)
			}
		}
		sort.Strings(e.Unexpected)
	}
	if len(e.Missing)+len(e.Unexpected)+len(e.Mismatches) > 0 {
		return e
	}
	for _, p := range todo {
		p.dst.CopyFrom(p.src)
	}
	dropPackedWeights(m)
	return nil
}

// dtypeKind reports whether a stored dtype (a safetensors name or a Kiln
// DType's String) is floating point, and whether Kiln can load it at all.
func dtypeKind(dtype string) (isFloat, known bool) {
	switch dtype {
	case "F32", "F64", "F16", "BF16", "float32", "bfloat16":
		return true, true
	case "I64", "I32", "I8", "U8", "int64", "int32", "int8", "uint8":
		return false, true
	}
	return false, false
}
