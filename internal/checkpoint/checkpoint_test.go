package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/atomicfile"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

type record struct {
	Step int    `json:"step"`
	Note string `json:"note"`
}

// tensors is what the tests save: a channels-last weight, a bfloat16 one,
// an int64 counter.
func tensors() []nn.NamedTensor {
	g := autograd.NewGenerator(1)
	return []nn.NamedTensor{
		{Name: "conv.weight", Tensor: autograd.Randn(g, 4, 3, 2, 2).To(autograd.ChannelsLast)},
		{Name: "fc.weight", Tensor: autograd.Cast(autograd.Randn(g, 3, 5), autograd.BFloat16)},
		{Name: "bn.num_batches_tracked", Tensor: autograd.FromInt64([]int64{7})},
	}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	want := record{Step: 12, Note: "mid-epoch"}
	ts := tensors()
	if err := Write(path, want, ts); err != nil {
		t.Fatal(err)
	}
	var got record
	back, ok, err := Read(path, &got)
	if err != nil || !ok {
		t.Fatalf("Read = %v, %v", ok, err)
	}
	if got != want {
		t.Errorf("record %+v, want %+v", got, want)
	}
	if len(back) != len(ts) {
		t.Fatalf("read %d tensors, wrote %d", len(back), len(ts))
	}
	for _, nt := range ts {
		i := find(back, nt.Name)
		if i < 0 {
			t.Fatalf("tensor %s not read back", nt.Name)
		}
		a := autograd.Cast(nt.Tensor.Detach().Contiguous(), back[i].Tensor.DType())
		if !slices.Equal(a.Shape(), back[i].Tensor.Shape()) || checksum([]nn.NamedTensor{{Name: "x", Tensor: a}}) != checksum([]nn.NamedTensor{{Name: "x", Tensor: back[i].Tensor}}) {
			t.Errorf("tensor %s reads back as %v, wrote %v", nt.Name, back[i].Tensor, nt.Tensor)
		}
	}
}

// TestPlainFile reads a safetensors file with no record: it comes back
// whole, unchecked.
func TestPlainFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sd.safetensors")
	if err := nn.SaveTensors(path, tensors()); err != nil {
		t.Fatal(err)
	}
	var r record
	ts, ok, err := Read(path, &r)
	if err != nil || ok || len(ts) != 3 || r != (record{}) {
		t.Errorf("Read of a state dict = %d tensors, %v, %v, record %+v", len(ts), ok, err, r)
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	if err := Write(good, record{Step: 3}, tensors()); err != nil {
		t.Fatal(err)
	}
	// rewrite saves good's tensors to a new file after edit changes them.
	rewrite := func(name string, edit func(ts []nn.NamedTensor) []nn.NamedTensor) string {
		ts, err := nn.ReadTensors(good)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := nn.SaveTensors(path, edit(ts)); err != nil {
			t.Fatal(err)
		}
		return path
	}
	text := func(s string) *autograd.Tensor { return autograd.FromUint8([]byte(s), len(s)) }
	replace := func(name string, t *autograd.Tensor) func([]nn.NamedTensor) []nn.NamedTensor {
		return func(ts []nn.NamedTensor) []nn.NamedTensor {
			ts[find(ts, name)].Tensor = t
			return ts
		}
	}
	flipped := filepath.Join(dir, "flipped.safetensors")
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// Data starts after the 8-byte header size and the header; the first
	// 8 bytes are bn.num_batches_tracked, conv.weight follows.
	b[8+binary.LittleEndian.Uint64(b)+8+10] ^= 1
	if err := os.WriteFile(flipped, b, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, path, field string
		is                error
	}{
		{"bit flipped", flipped, ChecksumKey, ErrChecksum},
		{"record edited", rewrite("edited", replace(RecordKey, text(`{"step":4}`))), ChecksumKey, ErrChecksum},
		{"tensor swapped", rewrite("swapped", func(ts []nn.NamedTensor) []nn.NamedTensor {
			i := find(ts, "conv.weight")
			ts[i].Tensor = autograd.Neg(ts[i].Tensor)
			return ts
		}), ChecksumKey, ErrChecksum},
		{"no checksum", rewrite("nosum", func(ts []nn.NamedTensor) []nn.NamedTensor {
			return slices.Delete(ts, find(ts, ChecksumKey), find(ts, ChecksumKey)+1)
		}), ChecksumKey, nil},
		{"checksum not text", rewrite("sumtype", replace(ChecksumKey, autograd.Zeros(2))), ChecksumKey, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Read(c.path, &record{})
			var e *Error
			if !errors.As(err, &e) || e.File != c.path || e.Field != c.field {
				t.Fatalf("Read = %v, want a *checkpoint.Error for %s, field %s", err, c.path, c.field)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("Read = %v, want one wrapping %v", err, c.is)
			}
		})
	}

	// A record of the wrong type, consistently checksummed, names its
	// field.
	wrongType := filepath.Join(dir, "type.safetensors")
	if err := Write(wrongType, map[string]any{"step": "three"}, tensors()); err != nil {
		t.Fatal(err)
	}
	_, _, err = Read(wrongType, &record{})
	if e, ok := errors.AsType[*Error](err); !ok || e.Field != "step" {
		t.Errorf("Read of a record with a string step = %v, want a *checkpoint.Error for field step", err)
	}
}

// TestWriteRefusesNonFinite keeps a good checkpoint when the tensors to
// replace it with hold a NaN.
func TestWriteRefusesNonFinite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	if err := Write(path, record{Step: 1}, tensors()); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := tensors()
	bad[0].Tensor.Float32s()[5] = float32(math.NaN())
	err = Write(path, record{Step: 2}, bad)
	if e, ok := errors.AsType[*kiln.NonFiniteError](err); !ok || e.Name != "conv.weight" {
		t.Errorf("Write of a NaN tensor = %v, want a *kiln.NonFiniteError naming conv.weight", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("a refused Write changed the checkpoint")
	}
	if err := Write(filepath.Join(path, "nowhere", "ck"), record{}, tensors()); err == nil {
		t.Error("Write into a missing folder succeeded")
	}
}

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	// The name the writer gives its temporary file, caught mid-write.
	var live string
	werr := errors.New("stop")
	err := atomicfile.Write(path, func(io.Writer) error {
		m, _ := filepath.Glob(filepath.Join(dir, ".ck.safetensors.tmp*"))
		if len(m) == 1 {
			live = filepath.Base(m[0])
		}
		return werr
	})
	if !errors.Is(err, werr) || live == "" {
		t.Fatalf("no temporary file seen during a write (%v)", err)
	}
	stale := []string{live, ".ck.safetensors.tmp1", ".ck.safetensors.tmp4294967295"}
	kept := []string{"ck.safetensors", ".ck.safetensors.tmp", ".ck.safetensors.tmp12a", ".ck.safetensors.tmp7.bak",
		".other.safetensors.tmp1", "ck.safetensors.tmp1"}
	for _, name := range append(slices.Clone(stale), kept...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ".ck.safetensors.tmp9"), 0o755); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, ".ck.safetensors.tmp9")
	removed, err := RemoveStale(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range removed {
		got = append(got, filepath.Base(r))
	}
	slices.Sort(got)
	slices.Sort(stale)
	if !slices.Equal(got, stale) {
		t.Errorf("RemoveStale removed %q, want %q", got, stale)
	}
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("RemoveStale removed %s: %v", name, err)
		}
	}
	if _, err := RemoveStale(filepath.Join(dir, "nowhere", "ck")); err == nil {
		t.Error("RemoveStale of a checkpoint in a missing folder succeeded")
	}
}

func TestMissingState(t *testing.T) {
	buf := autograd.Zeros(2)
	sd := &optim.StateDict{
		State:  map[int]map[string]*autograd.Tensor{0: {"momentum_buffer": buf}, 2: {"momentum_buffer": buf}, 3: {"sum": buf}},
		Groups: []optim.GroupState{{Params: []int{0, 1}}, {Params: []int{2, 3}}},
	}
	if got := MissingState(sd, "momentum_buffer"); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("MissingState = %v, want [1 3]", got)
	}
}
