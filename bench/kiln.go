package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/graph"
	"github.com/kilnml/kiln/graph/quant"
	"github.com/kilnml/kiln/internal/npy"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
	"github.com/kilnml/kiln/optim"
	"github.com/kilnml/kiln/serve"
)

// Prepare allocates and fills the data of w for Kiln and returns a
// function that runs it once. Kernels with output arguments (GEMM,
// convolution, the SGD step) write into buffers allocated here; the
// autograd ops (activations, softmax, norms) allocate their results on
// every run, as PyTorch's functional ops do. Backward passes run on a
// fresh tape each time and the leaf gradients are dropped after each run,
// like torch.autograd.grad.
//
// A kind whose calls each need an untimed part first (splitKinds) runs
// both parts; RunKiln times only the second (prepareSplit).
func Prepare(w Workload) (func(), error) {
	if _, ok := splitKinds[w.Kind]; ok {
		setup, run, err := prepareSplit(w)
		if err != nil {
			return nil, err
		}
		return func() { setup(); run() }, nil
	}
	rng := rand.New(rand.NewPCG(1, uint64(len(w.Name))))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
		return s
	}
	need := func(n int) error { return checkDims(w, n) }
	d := w.Dims
	switch w.Kind {
	case KindGemm:
		if err := need(3); err != nil {
			return nil, err
		}
		m, n, k := d[0], d[1], d[2]
		a, b, c := fill(m*k), fill(k*n), make([]float32, m*n)
		return func() { kernels.Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n) }, nil

	case KindGemmBF16:
		if err := need(3); err != nil {
			return nil, err
		}
		m, n, k := d[0], d[1], d[2]
		a, b, c := make([]uint16, m*k), make([]uint16, k*n), make([]float32, m*n)
		kernels.F32ToBF16(a, fill(m*k))
		kernels.F32ToBF16(b, fill(k*n))
		return func() { kernels.GemmBF16(false, false, m, n, k, 1, a, k, b, n, 0, c, n) }, nil

	case KindGemmInt8:
		if err := need(3); err != nil {
			return nil, err
		}
		m, n, k := d[0], d[1], d[2]
		// Quantized as torch_bench.py quantizes them: A's values in
		// [-1, 1) with that range's parameters, W symmetric per channel.
		in := quant.ChooseParams(-1, 1, quant.PerTensorAffine)
		a := make([]uint8, m*k)
		kernels.QuantizeU8(a, fill(m*k), float32(in.Scale), in.ZeroPoint)
		wf, wq := fill(n*k), make([]int8, n*k)
		scales := make([]float32, n)
		for c, s := range quant.WeightScales(wf, n, true) {
			scales[c] = float32(s)
			kernels.QuantizeS8(wq[c*k:(c+1)*k], wf[c*k:(c+1)*k], scales[c], 0)
		}
		pw := kernels.PackInt8(n, k, wq, k)
		// A uint8 result with PyTorch's output parameters (scale 0.1, zero
		// point 128): the same bytes written on both sides.
		c := make([]uint8, m*n)
		ep := kernels.Int8Epilogue{Scale: float32(in.Scale), WScales: scales, OutScale: 0.1, OutZero: 128}
		return func() { kernels.GemmU8S8ToU8(m, a, k, in.ZeroPoint, pw, c, n, ep) }, nil

	case KindConvFwd, KindConvBwdData, KindConvBwdWeight:
		if err := need(8); err != nil {
			return nil, err
		}
		cd, _ := convDimsOf(d)
		s := cd.kernelShape()
		oh, ow := cd.OutHW()
		nx, nw, ny := cd.N*cd.H*cd.W*cd.C, cd.O*cd.K*cd.K*cd.C, cd.N*oh*ow*cd.O
		switch w.Kind {
		case KindConvFwd:
			x, wt, y := fill(nx), fill(nw), make([]float32, ny)
			return func() { kernels.ConvForward(s, x, wt, nil, y) }, nil
		case KindConvBwdData:
			dy, wt, dx := fill(ny), fill(nw), make([]float32, nx)
			return func() { kernels.ConvBackwardData(s, dy, wt, dx) }, nil
		default:
			x, dy, dw := fill(nx), fill(ny), make([]float32, nw)
			return func() { kernels.ConvBackwardWeight(s, x, dy, dw) }, nil
		}

	case KindReLU, KindGELU, KindAdd:
		if err := need(1); err != nil {
			return nil, err
		}
		// A new output each call, from an arena reset after it, as
		// PyTorch's caching allocator gives back the block just freed.
		x, arena := autograd.NoGrad(autograd.FromFloat32(fill(d[0]))), autograd.NewArena(0)
		switch w.Kind {
		case KindReLU:
			return func() { autograd.ReLU(arena.In(x)); arena.Reset() }, nil
		case KindGELU:
			return func() { autograd.GELU(arena.In(x), "none"); arena.Reset() }, nil
		default:
			y := autograd.FromFloat32(fill(d[0]))
			return func() { autograd.Add(arena.In(x), y); arena.Reset() }, nil
		}

	case KindReLUInto, KindGELUInto, KindAddInto:
		if err := need(1); err != nil {
			return nil, err
		}
		x, y := fill(d[0]), make([]float32, d[0])
		switch w.Kind {
		case KindReLUInto:
			return func() { kernels.Act{Fn: kernels.ActReLU}.Forward(y, x) }, nil
		case KindGELUInto:
			return func() { kernels.Act{Fn: kernels.ActGELU}.Forward(y, x) }, nil
		default:
			z := fill(d[0])
			return func() { kernels.Binary(kernels.BinAdd, y, x, z) }, nil
		}

	case KindSoftmax:
		if err := need(2); err != nil {
			return nil, err
		}
		x, arena := autograd.NoGrad(autograd.FromFloat32(fill(d[0]*d[1]), d[0], d[1])), autograd.NewArena(0)
		return func() { autograd.Softmax(arena.In(x), 1); arena.Reset() }, nil

	case KindBatchNorm:
		if err := need(4); err != nil {
			return nil, err
		}
		n, c, h, wd := d[0], d[1], d[2], d[3]
		x := autograd.FromFloat32(fill(n*c*h*wd), n, c, h, wd).To(autograd.ChannelsLast).SetRequiresGrad(true)
		dy := autograd.FromFloat32(fill(n*c*h*wd), n, c, h, wd).To(autograd.ChannelsLast)
		weight := autograd.FromFloat32(fill(c)).SetRequiresGrad(true)
		bias := autograd.FromFloat32(fill(c)).SetRequiresGrad(true)
		rm, rv := autograd.Zeros(c), autograd.Ones(c)
		// The gradients in an arena reset after each call, as
		// torch.autograd.grad's come from PyTorch's caching allocator.
		arena := autograd.NewArena(0)
		return func() {
			xa := arena.In(x)
			y := autograd.BatchNorm(xa, rm, rv, weight, bias, true, 0.1, 1e-5)
			autograd.Grad([]*autograd.Tensor{y}, []*autograd.Tensor{xa, weight, bias}, []*autograd.Tensor{dy})
			arena.Reset()
		}, nil

	case KindLayerNorm:
		if err := need(2); err != nil {
			return nil, err
		}
		rows, cols := d[0], d[1]
		x := autograd.FromFloat32(fill(rows*cols), rows, cols).SetRequiresGrad(true)
		dy := autograd.FromFloat32(fill(rows*cols), rows, cols)
		weight := autograd.FromFloat32(fill(cols)).SetRequiresGrad(true)
		bias := autograd.FromFloat32(fill(cols)).SetRequiresGrad(true)
		arena := autograd.NewArena(0) // as for batch norm
		return func() {
			xa := arena.In(x)
			y := autograd.LayerNorm(xa, []int{cols}, weight, bias, 1e-5)
			autograd.Grad([]*autograd.Tensor{y}, []*autograd.Tensor{xa, weight, bias}, []*autograd.Tensor{dy})
			arena.Reset()
		}, nil

	case KindSGD:
		if err := need(1); err != nil {
			return nil, err
		}
		p := autograd.FromFloat32(fill(d[0])).SetRequiresGrad(true)
		p.SetGrad(autograd.FromFloat32(fill(d[0])))
		opt, err := optim.NewSGD([]*autograd.Tensor{p}, optim.SGDOptions{LR: 0.01, Momentum: 0.9})
		if err != nil {
			return nil, err
		}
		return opt.Step, nil

	case KindResNet50Infer, KindResNet50InferFrozen:
		if err := need(2); err != nil {
			return nil, err
		}
		model, x := resNet50Input(d[0], d[1])
		nn.Eval(model)
		x, arena := autograd.NoGrad(x), autograd.NewArena(0)
		return func() { model.Forward(arena.In(x)); arena.Reset() }, nil

	case KindResNet50Instances:
		if err := need(4); err != nil {
			return nil, err
		}
		return resNet50Instances(d[0], d[1], d[2], d[3])
	case KindResNet50Serve:
		if err := need(4); err != nil {
			return nil, err
		}
		return resNet50Serve(d, nil)
	case KindResNet50Graph, KindResNet50GraphNoFuse:
		if err := need(2); err != nil {
			return nil, err
		}
		return resNet50Graph(d[0], d[1], w.Kind == KindResNet50Graph, false)

	case KindResNet50GraphBF16:
		if err := need(2); err != nil {
			return nil, err
		}
		return resNet50Graph(d[0], d[1], true, true)

	case KindResNet50GraphInt8:
		if err := need(4); err != nil {
			return nil, err
		}
		return resNet50GraphInt8(d[0], d[1], d[2], d[3])

	case KindResNet50Train:
		if err := need(2); err != nil {
			return nil, err
		}
		return resNet50TrainStep(d[0], d[1])

	case KindResNet50InferBF16:
		if err := need(2); err != nil {
			return nil, err
		}
		model, x := resNet50Input(d[0], d[1])
		nn.Eval(model)
		if _, err := kiln.Optimize(model, kiln.DType(autograd.BFloat16)); err != nil {
			return nil, err
		}
		x, arena := amp.Autocast(autograd.NoGrad(x)), autograd.NewArena(0)
		return func() { model.Forward(arena.In(x)); arena.Reset() }, nil

	case KindResNet50TrainBF16:
		if err := need(2); err != nil {
			return nil, err
		}
		return resNet50TrainStepBF16(d[0], d[1])

	case KindDLRMTrain, KindDLRMTrainFused, KindDLRMTrainBF16, KindDLRMInfer, KindDLRMInferFrozen, KindDLRMBagFwd, KindDLRMBagFwdBF16:
		if err := need(4); err != nil {
			return nil, err
		}
		switch w.Kind {
		case KindDLRMTrain, KindDLRMTrainFused:
			return dlrmTrainStep(d, false, w.Kind == KindDLRMTrainFused)
		case KindDLRMTrainBF16:
			return dlrmTrainStep(d, true, true)
		case KindDLRMInfer:
			return dlrmInfer(d)
		case KindDLRMBagFwd, KindDLRMBagFwdBF16:
			return dlrmBagForward(d, w.IsBF16())
		}
		return dlrmGraph(d)

	case KindDLRMInteraction, KindDLRMInteractionBF16:
		if err := need(3); err != nil {
			return nil, err
		}
		return dlrmInteraction(d, w.IsBF16())

	case KindResNet50TrainMem, KindDLRMTrainMem:
		return nil, fmt.Errorf("bench: %s: %s is measured in a fresh process (RunKiln), not timed", w.Name, w.Kind)
	}
	return nil, fmt.Errorf("bench: %s: unknown kind %q", w.Name, w.Kind)
}

// checkDims checks that w has n dims, all positive but a convolution's
// padding (its last, of 8).
func checkDims(w Workload, n int) error {
	if len(w.Dims) != n {
		return fmt.Errorf("bench: %s: %s needs %d dims, got %v", w.Name, w.Kind, n, w.Dims)
	}
	for i, d := range w.Dims {
		if d <= 0 && !(d == 0 && i == 7 && n == 8) {
			return fmt.Errorf("bench: %s: dims must be positive, got %v", w.Name, w.Dims)
		}
	}
	return nil
}

// splitKinds are the kinds whose every timed call needs an untimed part
// before it (the forward pass that records what a timed backward
// walks), with their dims count and preparation.
var splitKinds = map[string]struct {
	dims    int
	prepare func(d []int, bf16 bool) (setup, run func(), err error)
}{
	KindDLRMBagBwd:     {4, dlrmBagBackward},
	KindDLRMBagBwdBF16: {4, dlrmBagBackward},
}

// prepareSplit is Prepare for RunKiln: for a split kind the untimed part
// apart, as setup; for any other, a nil setup and Prepare's run.
func prepareSplit(w Workload) (setup, run func(), err error) {
	k, ok := splitKinds[w.Kind]
	if !ok {
		run, err = Prepare(w)
		return nil, run, err
	}
	if err := checkDims(w, k.dims); err != nil {
		return nil, nil, err
	}
	return k.prepare(w.Dims, w.IsBF16())
}

// resNet50Input builds ResNet-50 with seeded random weights, channels-last,
// and a batch of n random channels-last image×image images.
func resNet50Input(n, image int) (*models.ResNet, *autograd.Tensor) {
	g := autograd.NewGenerator(1)
	model := models.ResNet50(g, models.ResNetOptions{ChannelsLast: true})
	return model, autograd.Randn(g, n, 3, image, image).To(autograd.ChannelsLast)
}

// resNet50Graph traces and freezes ResNet-50 in evaluation mode, with
// fusion on or off, and returns a run of the compiled graph. With bf16 the
// model first gets BF16 weights from kiln.Optimize and is traced under
// amp.Autocast: a BF16 graph whose first node casts the float32
// channels-last images that each run is given.
func resNet50Graph(n, image int, fuse, bf16 bool) (func(), error) {
	model, x := resNet50Input(n, image)
	nn.Eval(model)
	in := x
	if bf16 {
		if _, err := kiln.Optimize(model, kiln.DType(autograd.BFloat16)); err != nil {
			return nil, err
		}
		in = amp.Autocast(x)
	}
	g, err := graph.Trace(model, in)
	if err != nil {
		return nil, err
	}
	frozen, err := graph.Freeze(g, graph.WithFusion(fuse))
	if err != nil {
		return nil, err
	}
	return compiledRun(frozen, x)
}

// frozenResNet50 traces and freezes the evaluation-mode ResNet-50 of
// resNet50Input on its n images, which it returns too.
func frozenResNet50(n, image int) (*graph.Graph, *autograd.Tensor, error) {
	model, x := resNet50Input(n, image)
	nn.Eval(model)
	g, err := graph.Trace(model, x)
	if err != nil {
		return nil, nil, err
	}
	frozen, err := graph.Freeze(g)
	return frozen, x, err
}

// resNet50Instances returns a run of ResNet-50's frozen FP32 graph on n
// images by instances Programs at once, each on a pool of cores pinned
// cores of its own (the first instances·cores of kernels.AvailableCores).
// The pools live as long as the process.
func resNet50Instances(n, image, instances, cores int) (func(), error) {
	avail, err := kernels.AvailableCores()
	if err != nil {
		return nil, err
	}
	if instances < 1 || cores < 1 || instances*cores > len(avail) {
		return nil, fmt.Errorf("%d instances × %d cores: this process may use %d cores", instances, cores, len(avail))
	}
	frozen, x, err := frozenResNet50(n, image)
	if err != nil {
		return nil, err
	}
	progs := make([]*graph.Program, instances)
	for i := range progs {
		pool, err := kernels.NewPool(avail[i*cores : (i+1)*cores])
		if err != nil {
			return nil, err
		}
		if progs[i], err = graph.Compile(frozen, graph.WithPool(pool)); err != nil {
			return nil, err
		}
	}
	errs := make([]error, instances)
	return func() {
		var wg sync.WaitGroup
		for i, p := range progs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = p.Run(x)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			panic(err) // in the caller's goroutine, where the harness reports it
		}
	}, nil
}

// resNet50Serve returns a run of clients concurrent requests of n images
// each to ResNet-50's frozen FP32 graph served by serve.New (batching up
// to maxBatch requests) on a loopback port, .npy request and response
// bodies over kept-alive connections. The server lives as long as the
// process.
func resNet50Serve(d []int, lat *requestLatencies) (func(), error) {
	n, image, clients, maxBatch := d[0], d[1], d[2], d[3]
	if clients < 1 || maxBatch < 1 {
		return nil, fmt.Errorf("%d clients, max batch %d: want 1 or more", clients, maxBatch)
	}
	frozen, x, err := frozenResNet50(n, image)
	if err != nil {
		return nil, err
	}
	s, err := serve.New(frozen, serve.Options{MaxBatch: maxBatch, MaxWait: 10 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go http.Serve(ln, s)
	var body bytes.Buffer
	if err := npy.Encode(&body, x.Contiguous()); err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String() + "/predict"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	post := func() error {
		if lat != nil {
			defer func(t0 time.Time) { lat.add(time.Since(t0)) }(time.Now())
		}
		req, err := http.NewRequest("POST", url, bytes.NewReader(body.Bytes()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-npy")
		req.Header.Set("Accept", "application/x-npy")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s", resp.Status, b)
		}
		return err
	}
	errs := make([]error, clients)
	return func() {
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = post()
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			panic(err)
		}
	}, nil
}

// compiledRun compiles g and returns a run of it on x.
func compiledRun(g *graph.Graph, x *autograd.Tensor) (func(), error) {
	p, err := graph.Compile(g)
	if err != nil {
		return nil, err
	}
	return func() {
		if _, err := p.Run(x); err != nil {
			panic(err)
		}
	}, nil
}

// resNet50GraphInt8 returns a run of ResNet-50's INT8 graph on n images,
// made as torch_bench.py makes PyTorch's: the evaluation-mode model
// traced, calibrated on batches random images (per-tensor affine uint8
// activations, min-max ranges, per-channel int8 weights), converted and
// compiled. The trace is of a calibration batch, which is smaller than
// n at batch 16 and cheaper to trace; the graph runs at any batch.
func resNet50GraphInt8(n, image, batches, batch int) (func(), error) {
	model, x := resNet50Input(n, image)
	nn.Eval(model)
	gen := autograd.NewGenerator(3)
	calib := make([]*autograd.Tensor, batches)
	for i := range calib {
		calib[i] = autograd.Randn(gen, batch, 3, image, image).To(autograd.ChannelsLast)
	}
	g, err := graph.Trace(model, calib[0])
	if err != nil {
		return nil, err
	}
	conf := quant.NewConf(quant.PerTensorAffine)
	cal, err := quant.Prepare(g, conf)
	if err != nil {
		return nil, err
	}
	for _, c := range calib {
		if err := cal.Observe(c); err != nil {
			return nil, err
		}
	}
	if err := cal.Finish(); err != nil {
		return nil, err
	}
	q, err := quant.Convert(g, conf)
	if err != nil {
		return nil, err
	}
	return compiledRun(q, x)
}

// resNet50TrainStep returns one training step of ResNet-50 on a fixed
// batch of n images and labels, as torch_bench.py's resnet50_train_step:
// drop the gradients, forward in train mode, cross-entropy, backward, SGD
// with momentum 0.9 and weight decay 1e-4. Activations and gradients come
// from an arena reset after each step, as a training loop runs.
func resNet50TrainStep(n, image int) (func(), error) {
	model, x := resNet50Input(n, image)
	nn.Train(model, true)
	labels := autograd.RandInt(autograd.NewGenerator(2), 0, 1000, n)
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDOptions{LR: 0.01, Momentum: 0.9, WeightDecay: 1e-4})
	if err != nil {
		return nil, err
	}
	arena := autograd.NewArena(0)
	return func() {
		opt.ZeroGrad()
		autograd.CrossEntropy(model.Forward(arena.In(x)), labels, autograd.CrossEntropyOptions{}).Backward()
		opt.Step()
		arena.Reset()
	}, nil
}

// resNet50TrainStepBF16 is resNet50TrainStep in BF16, as torch_bench.py's
// autocast step: kiln.Optimize splits the convolution and linear weights
// into BF16 halves and swaps in the split SGD; the step runs under
// amp.Autocast.
func resNet50TrainStepBF16(n, image int) (func(), error) {
	model, x := resNet50Input(n, image)
	nn.Train(model, true)
	labels := autograd.RandInt(autograd.NewGenerator(2), 0, 1000, n)
	sgd, err := optim.NewSGD(nn.Parameters(model), optim.SGDOptions{LR: 0.01, Momentum: 0.9, WeightDecay: 1e-4})
	if err != nil {
		return nil, err
	}
	o, err := kiln.Optimize(model, kiln.DType(autograd.BFloat16), kiln.WithOptimizer(sgd))
	if err != nil {
		return nil, err
	}
	opt, arena := o.Optimizer, autograd.NewArena(0)
	return func() {
		opt.ZeroGrad()
		loss := autograd.CrossEntropy(model.Forward(arena.In(amp.Autocast(x))), labels, autograd.CrossEntropyOptions{})
		loss.Backward()
		opt.Step()
		arena.Reset()
	}, nil
}

// kernelShape is the kernels.ConvShape of a channels-last 2-D
// convolution.
func (c ConvDims) kernelShape() *kernels.ConvShape {
	oh, ow := c.OutHW()
	return &kernels.ConvShape{
		N: c.N, C: c.C, O: c.O, Groups: 1,
		In: [3]int{1, c.H, c.W}, Out: [3]int{1, oh, ow}, Kernel: [3]int{1, c.K, c.K},
		Stride: [3]int{1, c.Stride, c.Stride}, Pad: [3]int{0, c.Pad, c.Pad}, Dil: [3]int{1, 1, 1},
		ChannelsLast: true,
	}
}
