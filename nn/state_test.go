package nn_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/internal/golden"
	"github.com/kilnml/kiln/internal/safetensors"
	"github.com/kilnml/kiln/internal/tensorcodec"
	"github.com/kilnml/kiln/nn"
)

func names(ts []nn.NamedTensor) []string {
	var out []string
	for _, nt := range ts {
		out = append(out, nt.Name)
	}
	return out
}

func TestStateDictNames(t *testing.T) {
	n := newTestNet(autograd.NewGenerator(1))
	want := []string{
		"features.0.weight", "features.0.bias",
		"bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked",
		"fc.weight", "fc.bias",
	}
	if got := names(nn.StateDict(n)); !reflect.DeepEqual(got, want) {
		t.Errorf("StateDict names\n got %q\nwant %q", got, want)
	}
	wantParams := []string{"features.0.weight", "features.0.bias", "bn1.weight", "bn1.bias", "fc.weight", "fc.bias"}
	if got := names(nn.NamedParameters(n)); !reflect.DeepEqual(got, wantParams) {
		t.Errorf("NamedParameters\n got %q\nwant %q", got, wantParams)
	}
	list := nn.NewModuleList(nn.NewLinear(autograd.NewGenerator(1), 2, 2, nn.LinearOptions{NoBias: true}), nn.NewBatchNorm1d(2, nn.BatchNormOptions{NoAffine: true}))
	wantList := []string{"0.weight", "1.running_mean", "1.running_var", "1.num_batches_tracked"}
	if got := names(nn.StateDict(list)); !reflect.DeepEqual(got, wantList) {
		t.Errorf("ModuleList state dict\n got %q\nwant %q", got, wantList)
	}
}

// equalState reports the first entry whose values differ between a and b.
func equalState(t *testing.T, a, b nn.Module) {
	t.Helper()
	sa, sb := nn.StateDict(a), nn.StateDict(b)
	for i := range sa {
		if !reflect.DeepEqual(sa[i].Tensor.Values(), sb[i].Tensor.Values()) {
			t.Errorf("%s differs after the round trip", sa[i].Name)
		}
	}
}

func TestStateDictRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "net.safetensors")
	src := newTestNet(autograd.NewGenerator(1))
	scramble(autograd.NewGenerator(2), src)
	nn.To(src, autograd.ChannelsLast)
	if err := nn.SaveStateDict(src, path); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the save left %d files in its directory, want 1", len(entries))
	}

	// The file holds logical (NCHW) order whatever the memory format.
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v, want format=pt", f.Metadata)
	}
	e, _ := f.Get("features.0.weight")
	w, _ := tensorcodec.Decode(e)
	golden.AssertClose(t, "saved conv weight", w, src.Features.At(0).(*nn.Conv2d).Weight(), 0)
	if e, _ := f.Get("bn1.num_batches_tracked"); e.DType != "I64" || len(e.Shape) != 0 {
		t.Errorf("num_batches_tracked saved as %s %v, want I64 []", e.DType, e.Shape)
	}

	dst := newTestNet(autograd.NewGenerator(3))
	conv := dst.Features.At(0).(*nn.Conv2d)
	nn.To(dst, autograd.ChannelsLast)
	weight := conv.Weight()
	if err := nn.LoadStateDict(dst, path); err != nil {
		t.Fatal(err)
	}
	equalState(t, src, dst)
	if conv.Weight() != weight || weight.Format() != autograd.ChannelsLast {
		t.Errorf("loading replaced the weight or changed its format to %v", conv.Weight().Format())
	}

	// The same through LoadTensors, into a contiguous model.
	dst2 := newTestNet(autograd.NewGenerator(4))
	if err := nn.LoadTensors(dst2, nn.StateDict(src)); err != nil {
		t.Fatal(err)
	}
	equalState(t, src, dst2)
}

func TestStateDictBFloat16(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bf16.safetensors")
	lin := nn.NewLinear(autograd.NewGenerator(1), 3, 2, nn.LinearOptions{})
	bf := autograd.Cast(lin.Weight().Detach(), autograd.BFloat16)
	lin.SetParameter("weight", bf)
	if err := nn.SaveStateDict(lin, path); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := f.Get("weight")
	if e.DType != "F32" {
		t.Fatalf("bfloat16 weight saved as %s, want F32", e.DType)
	}
	saved, _ := tensorcodec.Decode(e)
	golden.AssertClose(t, "saved bfloat16 weight", saved, bf, 0)

	// F32 loads into a bfloat16 parameter, rounding.
	other := nn.NewLinear(autograd.NewGenerator(2), 3, 2, nn.LinearOptions{})
	other.SetParameter("weight", autograd.Cast(other.Weight().Detach(), autograd.BFloat16))
	if err := nn.LoadStateDict(other, path); err != nil {
		t.Fatal(err)
	}
	if other.Weight().DType() != autograd.BFloat16 {
		t.Errorf("loading changed the dtype to %v", other.Weight().DType())
	}
	golden.AssertClose(t, "loaded bfloat16 weight", other.Weight(), bf, 0)
}

// rewrite saves m's state dict to a temporary file, lets edit change the
// container, writes it back and returns its path.
func rewrite(t *testing.T, m nn.Module, edit func(f *safetensors.File)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.safetensors")
	if err := nn.SaveStateDict(m, path); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(f)
	if err := safetensors.WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	return path
}

func without(f *safetensors.File, name string) {
	for i, e := range f.Tensors {
		if e.Name == name {
			f.Tensors = append(f.Tensors[:i], f.Tensors[i+1:]...)
			return
		}
	}
}

func set(f *safetensors.File, e safetensors.Tensor) {
	without(f, e.Name)
	f.Tensors = append(f.Tensors, e)
}

func TestLoadStateDictErrors(t *testing.T) {
	src := newTestNet(autograd.NewGenerator(1))
	edit := func(fn func(f *safetensors.File)) func(t *testing.T) string {
		return func(t *testing.T) string { return rewrite(t, src, fn) }
	}
	raw := func(fn func(b []byte) []byte) func(t *testing.T) string {
		return func(t *testing.T) string {
			path := rewrite(t, src, func(*safetensors.File) {})
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, fn(b), 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}
	}
	// container writes a file of the JSON header js and n zero data bytes.
	container := func(js string, n int) func(t *testing.T) string {
		return raw(func([]byte) []byte {
			b := append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...)
			return append(b, make([]byte, n)...)
		})
	}
	cases := []struct {
		name string
		file func(t *testing.T) string
		opt  nn.LoadOptions
		want []string // substrings of the error; nil means success
	}{
		{"missing key", edit(func(f *safetensors.File) { without(f, "fc.bias") }), nn.LoadOptions{},
			[]string{`missing key(s) in state dict: "fc.bias"`}},
		{"unexpected key", edit(func(f *safetensors.File) {
			set(f, safetensors.Tensor{Name: "fc.extra", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)})
		}), nn.LoadOptions{}, []string{`unexpected key(s) in state dict: "fc.extra"`}},
		{"shape mismatch", edit(func(f *safetensors.File) {
			set(f, safetensors.Tensor{Name: "fc.weight", DType: "F32", Shape: []int{4, 2}, Data: make([]byte, 32)})
		}), nn.LoadOptions{}, []string{"size mismatch for fc.weight", "[4 2]", "[2 4]"}},
		{"float into integer buffer", edit(func(f *safetensors.File) {
			set(f, safetensors.Tensor{Name: "bn1.num_batches_tracked", DType: "F32", Shape: []int{}, Data: make([]byte, 4)})
		}), nn.LoadOptions{}, []string{"dtype mismatch for bn1.num_batches_tracked", "F32", "int64"}},
		{"integer into float parameter", edit(func(f *safetensors.File) {
			set(f, safetensors.Tensor{Name: "fc.bias", DType: "I64", Shape: []int{2}, Data: make([]byte, 16)})
		}), nn.LoadOptions{}, []string{"dtype mismatch for fc.bias", "I64", "float32"}},
		{"unsupported dtype", edit(func(f *safetensors.File) {
			set(f, safetensors.Tensor{Name: "fc.bias", DType: "U16", Shape: []int{2}, Data: make([]byte, 4)})
		}), nn.LoadOptions{}, []string{"unsupported dtype for fc.bias", "U16"}},
		{"all problems at once", edit(func(f *safetensors.File) {
			without(f, "bn1.running_var")
			set(f, safetensors.Tensor{Name: "head.weight", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)})
			set(f, safetensors.Tensor{Name: "fc.bias", DType: "F32", Shape: []int{3}, Data: make([]byte, 12)})
		}), nn.LoadOptions{}, []string{`"bn1.running_var"`, `"head.weight"`, "size mismatch for fc.bias"}},
		{"non-strict ignores missing and unexpected keys", edit(func(f *safetensors.File) {
			without(f, "fc.bias")
			set(f, safetensors.Tensor{Name: "fc.extra", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)})
		}), nn.LoadOptions{NonStrict: true}, nil},
		{"non-strict still checks shapes", edit(func(f *safetensors.File) {
			set(f, safetensors.Tensor{Name: "fc.bias", DType: "F32", Shape: []int{3}, Data: make([]byte, 12)})
		}), nn.LoadOptions{NonStrict: true}, []string{"size mismatch for fc.bias"}},
		{"truncated file", raw(func(b []byte) []byte { return b[:len(b)-10] }), nn.LoadOptions{},
			[]string{"state.safetensors", "truncated at byte"}},
		{"bad header", raw(func(b []byte) []byte { b[8] = 'x'; return b }), nn.LoadOptions{},
			[]string{"state.safetensors", "bad JSON header (bytes 8.."}},
		{"header length past the end", raw(func(b []byte) []byte { b[7] = 1; return b }), nn.LoadOptions{},
			[]string{"state.safetensors", "at byte 0"}},
		// 2⁶² float32s are 2⁶⁴ bytes, which wraps to the empty data the
		// entry claims; loading it once crashed in make.
		{"shape whose size wraps", container(`{"fc.bias":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}`, 0),
			nn.LoadOptions{}, []string{"state.safetensors", `tensor "fc.bias"`, "shape [4611686018427387904]"}},
		// (2⁶⁰+1)·16 float32s wrap around to the 64 bytes the entry has.
		{"shape whose size wraps to the data", container(`{"fc.bias":{"dtype":"F32","shape":[1152921504606846977,16],"data_offsets":[0,64]}}`, 64),
			nn.LoadOptions{}, []string{"state.safetensors", `tensor "fc.bias"`, "shape [1152921504606846977 16]"}},
		{"shape larger than the data", container(`{"fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4),
			nn.LoadOptions{}, []string{"state.safetensors", `tensor "fc.bias"`, "shape [2]"}},
		{"shape smaller than the data", container(`{"fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}}`, 12),
			nn.LoadOptions{}, []string{"state.safetensors", `tensor "fc.bias"`, "shape [2]"}},
		{"negative dimension", container(`{"fc.bias":{"dtype":"F32","shape":[-2],"data_offsets":[0,0]}}`, 0),
			nn.LoadOptions{}, []string{"state.safetensors", `tensor "fc.bias"`, "shape", "-2"}},
		{"empty file", raw(func([]byte) []byte { return nil }), nn.LoadOptions{}, []string{"state.safetensors", "file is 0 bytes"}},
		{"boolean entry", edit(func(f *safetensors.File) {
			set(f, safetensors.Tensor{Name: "fc.bias", DType: "BOOL", Shape: []int{2}, Data: []byte{1, 0}})
		}), nn.LoadOptions{}, []string{"unsupported dtype for fc.bias", "BOOL"}},
		{"nonexistent file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope.safetensors") },
			nn.LoadOptions{}, []string{"nope.safetensors", "no such file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := newTestNet(autograd.NewGenerator(7))
			before := nn.StateDict(newTestNet(autograd.NewGenerator(7)))
			err := nn.LoadStateDict(dst, c.file(t), c.opt)
			if c.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", c.want)
			}
			for _, w := range c.want {
				if !contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			// A failed load changes nothing.
			for i, nt := range nn.StateDict(dst) {
				if !reflect.DeepEqual(nt.Tensor.Values(), before[i].Tensor.Values()) {
					t.Errorf("failed load changed %s", nt.Name)
				}
			}
		})
	}
}

func TestLoadStateDictConverts(t *testing.T) {
	src := newTestNet(autograd.NewGenerator(1))
	w := src.FC.Weight().Values()
	f64 := make([]byte, 8*len(w))
	for i, v := range w {
		putU64(f64[8*i:], math.Float64bits(v))
	}
	// 1.5 and -0.25 in IEEE half precision.
	f16 := []byte{0x00, 0x3e, 0x00, 0xb4}
	path := rewrite(t, src, func(f *safetensors.File) {
		set(f, safetensors.Tensor{Name: "fc.weight", DType: "F64", Shape: []int{2, 4}, Data: f64})
		set(f, safetensors.Tensor{Name: "fc.bias", DType: "F16", Shape: []int{2}, Data: f16})
		set(f, safetensors.Tensor{Name: "bn1.num_batches_tracked", DType: "I32", Shape: []int{}, Data: []byte{5, 0, 0, 0}})
	})
	dst := newTestNet(autograd.NewGenerator(2))
	if err := nn.LoadStateDict(dst, path); err != nil {
		t.Fatal(err)
	}
	if got := dst.FC.Weight().Values(); !reflect.DeepEqual(got, w) {
		t.Errorf("F64 weight loaded as %v, want %v", got, w)
	}
	if got := dst.FC.Bias().Values(); !reflect.DeepEqual(got, []float64{1.5, -0.25}) {
		t.Errorf("F16 bias loaded as %v, want [1.5 -0.25]", got)
	}
	if got := dst.BN1.NumBatchesTracked(); got.DType() != autograd.Int64 || got.Item() != 5 {
		t.Errorf("I32 counter loaded as %v %v, want int64 5", got.DType(), got.Item())
	}
}

func putU64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func TestLoadTensorsErrors(t *testing.T) {
	src := nn.StateDict(newTestNet(autograd.NewGenerator(1)))
	replace := func(name string, x *autograd.Tensor) []nn.NamedTensor {
		out := slices.Clone(src)
		for i := range out {
			if out[i].Name == name {
				out[i].Tensor = x
			}
		}
		return out
	}
	cases := []struct {
		name string
		ts   []nn.NamedTensor
		opt  nn.LoadOptions
		want []string
	}{
		{"missing", src[1:], nn.LoadOptions{}, []string{`missing key(s) in state dict: "features.0.weight"`}},
		{"unexpected", append(slices.Clone(src), nn.NamedTensor{Name: "extra", Tensor: autograd.Zeros(1)}), nn.LoadOptions{}, []string{`unexpected key(s) in state dict: "extra"`}},
		{"shape", replace("fc.weight", autograd.Zeros(4, 2)), nn.LoadOptions{}, []string{"size mismatch for fc.weight", "[4 2]", "[2 4]"}},
		{"integer into float", replace("fc.bias", autograd.Empty(autograd.Int32, 2)), nn.LoadOptions{}, []string{"dtype mismatch for fc.bias: the state dict holds int32, the current model has float32"}},
		{"float into integer", replace("bn1.num_batches_tracked", autograd.Scalar(1)), nn.LoadOptions{NonStrict: true}, []string{"dtype mismatch for bn1.num_batches_tracked: the state dict holds float32"}},
		{"0-d for a vector", replace("fc.bias", autograd.Scalar(1)), nn.LoadOptions{}, []string{"size mismatch for fc.bias", "shape [] from the state dict", "[2]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := newTestNet(autograd.NewGenerator(7))
			before := nn.StateDict(newTestNet(autograd.NewGenerator(7)))
			err := nn.LoadTensors(dst, c.ts, c.opt)
			var se *nn.StateDictError
			if !errors.As(err, &se) || se.Path != "" {
				t.Fatalf("error %v, want a *StateDictError without a path", err)
			}
			for _, w := range c.want {
				if !contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			for i, nt := range nn.StateDict(dst) {
				if !reflect.DeepEqual(nt.Tensor.Values(), before[i].Tensor.Values()) {
					t.Errorf("failed load changed %s", nt.Name)
				}
			}
		})
	}
	err := autograd.Try(func() { nn.LoadTensors(newTestNet(autograd.NewGenerator(1)), replace("fc.bias", nil)) })
	if err == nil || !contains(err.Error(), `LoadTensors: tensor "fc.bias" is nil`) {
		t.Errorf("nil tensor: %v", err)
	}
}

func TestSaveTensorsErrors(t *testing.T) {
	dir := t.TempDir()
	err := nn.SaveTensors(filepath.Join(dir, "nil.safetensors"), []nn.NamedTensor{{Name: "w", Tensor: autograd.Zeros(1)}, {Name: "b"}})
	var fe *nn.FileError
	if !errors.As(err, &fe) || fe.Field != "b" || !contains(err.Error(), "nil.safetensors") || !contains(err.Error(), `tensor "b": the tensor is nil`) {
		t.Errorf("nil tensor: %v", err)
	}
	dup := []nn.NamedTensor{{Name: "w", Tensor: autograd.Zeros(1)}, {Name: "w", Tensor: autograd.Zeros(2)}}
	if err := nn.SaveTensors(filepath.Join(dir, "dup.safetensors"), dup); err == nil || !contains(err.Error(), `duplicate tensor name "w"`) {
		t.Errorf("duplicate name: %v", err)
	}
	missing := filepath.Join(dir, "no", "such", "dir", "m.safetensors")
	if err := nn.SaveStateDict(newTestNet(autograd.NewGenerator(1)), missing); err == nil || !contains(err.Error(), missing) {
		t.Errorf("missing directory: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed saves left %d files behind", len(entries))
	}
}

func TestReadTensors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.safetensors")
	in := []nn.NamedTensor{{Name: "b", Tensor: autograd.FromFloat32([]float32{1, 2, 3}, 3)}, {Name: "a", Tensor: autograd.FromInt64([]int64{7}, 1)}}
	if err := nn.SaveTensors(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := nn.ReadTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, nt := range out {
		got[nt.Name] = fmt.Sprint(nt.Tensor.DType(), nt.Tensor.Values())
	}
	if got["b"] != "float32 [1 2 3]" || got["a"] != "int64 [7]" || len(out) != 2 {
		t.Errorf("read back %v", got)
	}
	if _, err := nn.ReadTensors(filepath.Join(t.TempDir(), "missing.safetensors")); err == nil || !strings.Contains(err.Error(), "missing.safetensors") {
		t.Errorf("missing file: %v", err)
	}
	// A shape whose byte count wraps around to the 64 bytes present.
	js := `{"w":{"dtype":"F32","shape":[1152921504606846977,16],"data_offsets":[0,64]}}`
	b := append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...)
	if err := os.WriteFile(path, append(b, make([]byte, 64)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := nn.ReadTensors(path); err == nil || !contains(err.Error(), "t.safetensors") || !contains(err.Error(), `"w"`) || !contains(err.Error(), "shape [1152921504606846977 16]") {
		t.Errorf("wrapping shape: %v, want an error naming the file, the tensor and its shape", err)
	}
}
