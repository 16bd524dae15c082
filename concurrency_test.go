package kiln_test

import (
	"fmt"
	"hash/fnv"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/optim"
)

// TestConcurrentModes trains a model in one goroutine while others run
// inference, autocast inference, compiled graphs and traces on other
// models, and checks that every training step gives the bits it gives
// alone: grad mode, autocast and tracing belong to each computation, so
// nothing another goroutine does may switch them for the training step.
// make test also runs it under the race detector.
func TestConcurrentModes(t *testing.T) {
	steps := 300
	if testing.Short() {
		steps = 100
	}
	for _, bf16 := range []bool{false, true} {
		alone, failed := train(t, steps, bf16, nil)
		if failed != 0 {
			t.Fatalf("bf16 %v: %d of %d steps failed with nothing else running", bf16, failed, steps)
		}
		for _, d := range disturbances(t) {
			t.Run(fmt.Sprintf("bf16=%v/%s", bf16, d.name), func(t *testing.T) {
				var runs atomic.Int64
				got, failed := train(t, steps, bf16, func(stop <-chan struct{}, wg *sync.WaitGroup) <-chan struct{} {
					// Training waits for the first run to finish, so on a
					// busy machine with few cores the short training loop
					// cannot end before the disturbance has started.
					ran := make(chan struct{})
					var once sync.Once
					// Two goroutines of each kind, so they also meet each
					// other.
					for range 2 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							defer once.Do(func() { close(ran) })
							for {
								select {
								case <-stop:
									return
								default:
								}
								if err := autograd.Try(d.run); err != nil {
									t.Errorf("%s beside training: %v", d.name, err)
									return
								}
								runs.Add(1)
								once.Do(func() { close(ran) })
							}
						}()
					}
					return ran
				})
				if failed != 0 {
					t.Errorf("%d of %d training steps failed", failed, steps)
				}
				if runs.Load() == 0 {
					t.Fatalf("%s never ran while the model trained", d.name)
				}
				for i := range alone {
					if got[i] != alone[i] {
						t.Fatalf("step %d differs from training alone: %+v, alone %+v (%d %s runs meanwhile)", i, got[i], alone[i], runs.Load(), d.name)
					}
				}
			})
		}
	}
}

// stepBits is what one training step leaves: its loss and a hash of every
// parameter's bits after the optimizer step.
type stepBits struct {
	loss   uint32
	params uint64
}

// train runs steps of SGD on a small MLP and returns each step's bits and
// how many steps failed. beside, if not nil, starts goroutines that run
// until training ends; the first step waits until the channel it returns
// is closed.
func train(t *testing.T, steps int, bf16 bool, beside func(stop <-chan struct{}, wg *sync.WaitGroup) <-chan struct{}) ([]stepBits, int) {
	t.Helper()
	g := autograd.NewGenerator(7)
	model := mlp(g)
	x := autograd.Randn(g, 32, 16)
	labels := autograd.RandInt(g, 0, 10, 32)
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDOptions{LR: 0.05, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if beside != nil {
		<-beside(stop, &wg)
	}
	bits := make([]stepBits, steps)
	failed := 0
	for i := range bits {
		err := autograd.Try(func() {
			in := x
			if bf16 {
				in = amp.Autocast(x)
			}
			loss := autograd.CrossEntropy(model.Forward(in), labels, autograd.CrossEntropyOptions{})
			opt.ZeroGrad()
			loss.Backward()
			for _, p := range nn.Parameters(model) {
				if p.Grad() == nil {
					autograd.Fail("train", "a parameter got no gradient")
				}
			}
			opt.Step()
			bits[i] = stepBits{loss: math.Float32bits(float32(loss.Item())), params: paramHash(model)}
		})
		if err != nil {
			failed++
		}
	}
	close(stop)
	wg.Wait()
	return bits, failed
}

func mlp(g *autograd.Generator) *nn.Sequential {
	return nn.NewSequential(nn.NewLinear(g, 16, 32, nn.LinearOptions{}), nn.NewReLU(), nn.NewLinear(g, 32, 10, nn.LinearOptions{}))
}

func paramHash(m nn.Module) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, p := range nn.Parameters(m) {
		for _, v := range p.ContiguousFloat32s() {
			u := math.Float32bits(v)
			b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

type disturbance struct {
	name string
	run  func()
}

// disturbances are what other goroutines do beside training, each on a
// model of its own.
func disturbances(t *testing.T) []disturbance {
	g := autograd.NewGenerator(11)
	other := nn.Eval(mlp(g))
	x := autograd.Randn(g, 8, 16)
	traced, err := graph.Trace(other, x)
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := graph.Freeze(traced)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := graph.Compile(frozen)
	if err != nil {
		t.Fatal(err)
	}
	// A model whose parameters require gradients, traced and compiled
	// unfrozen: its constants are the parameters themselves.
	live := mlp(autograd.NewGenerator(12))
	liveTraced, err := graph.Trace(live, x)
	if err != nil {
		t.Fatal(err)
	}
	liveProg, err := graph.Compile(liveTraced)
	if err != nil {
		t.Fatal(err)
	}
	// A trace sees the ops of its own forward and nothing else: the same
	// graph each time, whatever runs beside it.
	traceOne := func(in *autograd.Tensor) string {
		gr, err := graph.Trace(nn.Eval(mlp(autograd.NewGenerator(13))), in)
		if err != nil {
			autograd.Fail("Trace", "%v", err)
		}
		return gr.String()
	}
	want, wantBF16 := traceOne(x), traceOne(amp.Autocast(x))
	return []disturbance{
		{"Program.Run", func() {
			if _, err := prog.Run(x); err != nil {
				autograd.Fail("Run", "%v", err)
			}
			if _, err := liveProg.Run(x); err != nil {
				autograd.Fail("Run", "%v", err)
			}
		}},
		{"NoGrad inference", func() { other.Forward(autograd.NoGrad(x)) }},
		{"autocast inference", func() {
			if y := other.Forward(amp.Autocast(autograd.NoGrad(x))); y.DType() != autograd.BFloat16 {
				autograd.Fail("autocast", "inference gave %v", y.DType())
			}
		}},
		{"Trace", func() {
			if got := traceOne(x); got != want {
				autograd.Fail("Trace", "traced\n%s\nalone it traces\n%s", got, want)
			}
			if got := traceOne(amp.Autocast(x)); got != wantBF16 {
				autograd.Fail("Trace", "traced under autocast\n%s\nalone it traces\n%s", got, wantBF16)
			}
		}},
	}
}
