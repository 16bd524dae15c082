package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/nn"
)

// TestTrainingLayout writes model and optimizer state with
// TrainingTensors, under a prefix and under bare names, and reads them
// back with ReadWeights: the same tensors, the same record, the same
// bytes from equal states whatever the maps' order; a plain state dict
// (with DataParallel's "module." names) comes back as model tensors; a
// stray tensor in a checkpoint is an *Error naming it.
func TestTrainingLayout(t *testing.T) {
	dir := t.TempDir()
	model := tensors()
	state := map[int]map[string]*autograd.Tensor{
		2: {"sum": autograd.FromFloat32([]float32{1, 2, 3}, 3), "step": autograd.Scalar(4)},
		0: {"sum": autograd.FromFloat32([]float32{5}, 1), "step": autograd.Scalar(4)},
	}
	for _, prefix := range []string{ModelPrefix, ""} {
		var files [][]byte
		for i := range 3 {
			path := filepath.Join(dir, "ckpt"+prefix+string(rune('0'+i)))
			if err := Write(path, record{Step: 9}, TrainingTensors(prefix, model, state)); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, b)
			var r record
			w, err := ReadWeights(path, prefix, &r)
			if err != nil {
				t.Fatal(err)
			}
			if !w.Checkpoint || r.Step != 9 || len(w.Model) != len(model) || len(w.State) != 2 || len(w.State[2]) != 2 {
				t.Fatalf("prefix %q: ReadWeights = checkpoint %v, record %+v, %d model tensors, state %v", prefix, w.Checkpoint, r, len(w.Model), w.State)
			}
			for _, want := range model {
				if k := find(w.Model, want.Name); k < 0 || w.Model[k].Tensor.Numel() != want.Tensor.Numel() {
					t.Errorf("prefix %q: model tensor %s missing or resized in %v", prefix, want.Name, w.Model)
				}
			}
			if got := w.State[2]["sum"].Float32s(); len(got) != 3 || got[2] != 3 {
				t.Errorf("prefix %q: state 2 sum = %v", prefix, got)
			}
		}
		if !bytes.Equal(files[0], files[1]) || !bytes.Equal(files[0], files[2]) {
			t.Errorf("prefix %q: equal states wrote different files", prefix)
		}
	}

	plain := filepath.Join(dir, "plain.safetensors")
	var prefixed []nn.NamedTensor
	for _, nt := range model {
		prefixed = append(prefixed, nn.NamedTensor{Name: "module." + nt.Name, Tensor: nt.Tensor})
	}
	if err := nn.SaveTensors(plain, prefixed); err != nil {
		t.Fatal(err)
	}
	w, err := ReadWeights(plain, ModelPrefix, &record{})
	if err != nil || w.Checkpoint || len(w.Model) != len(model) || find(w.Model, model[0].Name) < 0 {
		t.Errorf("ReadWeights of a DataParallel state dict = %+v, %v", w, err)
	}

	stray := filepath.Join(dir, "stray")
	ts := append(TrainingTensors(ModelPrefix, model, state), nn.NamedTensor{Name: "extra", Tensor: autograd.Scalar(1)})
	if err := Write(stray, record{}, ts); err != nil {
		t.Fatal(err)
	}
	_, err = ReadWeights(stray, ModelPrefix, &record{})
	if e, ok := errors.AsType[*Error](err); !ok || e.Field != "extra" {
		t.Errorf("ReadWeights of a checkpoint with a stray tensor = %v, want an *Error for extra", err)
	}
}
