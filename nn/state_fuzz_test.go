package nn_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// FuzzLoadStateDict loads arbitrary bytes as a state dict into the test net
// (Conv2d, BatchNorm2d, Linear), strictly or not. Whatever the file holds,
// LoadStateDict returns; a panic of any kind, autograd's typed one
// included, is a failure, since a file is user data. A load that succeeds
// leaves every entry with the shape, dtype and memory format it had.
func FuzzLoadStateDict(f *testing.F) {
	dir := f.TempDir()
	seed := func(name string, ts []nn.NamedTensor) []byte {
		path := filepath.Join(dir, name)
		if err := nn.SaveTensors(path, ts); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	full := nn.StateDict(newTestNet(autograd.NewGenerator(1)))
	valid := seed("valid.safetensors", full)
	f.Add(valid, false)
	f.Add(valid, true)
	f.Add(seed("partial.safetensors", full[:3]), true)
	f.Add(seed("empty.safetensors", nil), true)
	f.Add(valid[:len(valid)/2], false)
	// The lie: (2⁶⁰+1)·16 float32s wrap around to the 64 bytes
	// present.
	js := `{"fc.bias":{"dtype":"F32","shape":[1152921504606846977,16],"data_offsets":[0,64]}}`
	f.Add(append(append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...), make([]byte, 64)...), true)

	// One model and one file serve every input: a load never changes
	// what is compared, so inputs cannot affect each other.
	m := newTestNet(autograd.NewGenerator(7))
	want := describeAll(m)
	path := filepath.Join(dir, "state.safetensors")
	f.Fuzz(func(t *testing.T, b []byte, nonStrict bool) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		if perr := autograd.Try(func() { err = nn.LoadStateDict(m, path, nn.LoadOptions{NonStrict: nonStrict}) }); perr != nil {
			t.Fatalf("LoadStateDict panicked: %v", perr)
		}
		if err != nil {
			return
		}
		if got := describeAll(m); !slices.Equal(got, want) {
			t.Fatalf("loaded entries are %v, want %v", got, want)
		}
	})
}

// describeAll sums up, entry by entry, what a load must not change about
// m's state dict: each tensor's shape, dtype, memory format and the number
// of elements its data holds.
func describeAll(m nn.Module) []string {
	var out []string
	for _, nt := range nn.StateDict(m) {
		x := nt.Tensor
		out = append(out, fmt.Sprint(nt.Name, x.Shape(), x.DType(), x.Format(), x.Numel()))
	}
	return out
}
