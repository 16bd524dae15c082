package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/amp"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/internal/checkpoint"
	"github.com/kilnml/kiln/internal/gcheadroom"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/metrics"
	"github.com/kilnml/kiln/nn/models"
	"github.com/kilnml/kiln/optim"
)

// newModel builds the DLRM the flags describe for src's tables, and loads
// --load-model (a checkpoint or a state dict) into it when given.
func newModel(o *options, src shapes) (*models.DLRM, error) {
	var f *modelFile
	if o.LoadModel != "" {
		var err error
		if f, err = readModelFile(o); err != nil {
			return nil, err
		}
	}
	return buildModel(o, src, f)
}

// buildModel builds the DLRM the flags describe for src's tables, with f's
// weights when f is not nil.
func buildModel(o *options, src shapes, f *modelFile) (*models.DLRM, error) {
	if d := src.denseFeatures(); d != o.mlpBot[0] {
		return nil, usagef("--arch-mlp-bot %s starts with %d inputs but the data has %d dense features", o.MLPBot, o.mlpBot[0], d)
	}
	m, err := models.NewDLRM(autograd.NewGenerator(o.Seed), models.DLRMConfig{
		SparseFeatureSize: o.SparseFeatureSize, EmbeddingSizes: src.tableRows(),
		BottomMLP: o.mlpBot, TopMLP: o.mlpTop,
		InteractionOp: o.InteractionOp, InteractionItself: o.InteractionItself,
		LossThreshold: o.LossThreshold, SparseTables: true,
	})
	if err != nil {
		return nil, err
	}
	if f != nil {
		if err := f.loadInto(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// newOptimizer is --optimizer over m's parameters.
func newOptimizer(o *options, m nn.Module) (optim.Optimizer, error) {
	params := nn.Parameters(m)
	switch o.Optimizer {
	case "adagrad":
		ao := optim.DefaultAdagradOptions()
		ao.LR = o.LearningRate
		return optim.NewAdagrad(params, ao)
	case "rwsadagrad":
		ro := optim.DefaultRowWiseAdagradOptions()
		ro.LR = o.LearningRate
		return optim.NewRowWiseAdagrad(params, ro)
	}
	return optim.NewSGD(params, optim.SGDOptions{LR: o.LearningRate})
}

// loss is --loss-function of the probabilities p against targets t:
// dlrm's MSELoss and BCELoss (means), or wbce, the per-sample BCE scaled
// by --loss-weights[t] and averaged.
func loss(o *options, p, t *autograd.Tensor) *autograd.Tensor {
	switch o.LossFunction {
	case "bce":
		return autograd.BCELoss(p, t, autograd.ReductionMean)
	case "wbce":
		tv := t.Float32s()
		w := make([]float32, len(tv))
		for i, v := range tv {
			w[i] = float32(o.lossWeights[int(math.Round(float64(v)))&1])
		}
		l := autograd.BCELoss(p, t, autograd.ReductionNone)
		return autograd.Mean(autograd.Mul(l, autograd.FromFloat32(w, t.Shape()...)), nil, false)
	}
	return autograd.MSELoss(p, t, autograd.ReductionMean)
}

// scores are held-out results: dlrm's test line.
type scores struct {
	auc, logLoss, accuracy float64
	samples                int
}

func (s scores) String() string {
	return fmt.Sprintf("auc %.5f, log loss %.5f, accuracy %.3f %% (%d samples)", s.auc, s.logLoss, 100*s.accuracy, s.samples)
}

// autocast returns the dense features x marked for BF16 autocast under
// --dtype bf16, so that the MLPs, the interaction and the sigmoid run in
// BF16 (Linear accumulating in FP32) and the loss in FP32; else x.
func (o *options) autocast(x *autograd.Tensor) *autograd.Tensor {
	if o.DType == "bf16" {
		return amp.Autocast(x)
	}
	return x
}

// float32s returns the values of p, the model's float32 or (under
// autocast) bfloat16 probabilities, as float32.
func float32s(p *autograd.Tensor) []float32 {
	if p.DType() != autograd.Float32 {
		p = autograd.Cast(p.Detach(), autograd.Float32)
	}
	return p.Float32s()
}

// test runs m over src's held-out batches in eval mode and scores them.
func test(o *options, m *models.DLRM, src source) (scores, error) {
	nn.Eval(m)
	defer nn.Train(m, true)
	var probs, labels []float32
	arena := autograd.NewArena(0) // each batch's activations, reused by the next
	for b, err := range src.testBatches() {
		if err != nil {
			return scores{}, err
		}
		var p *autograd.Tensor
		if err := autograd.Try(func() { p = m.Forward(arena.In(o.autocast(autograd.NoGrad(b.dense))), b.indices, b.offsets) }); err != nil {
			return scores{}, err
		}
		probs = append(probs, float32s(p)...)
		labels = append(labels, b.target.Float32s()...)
		arena.Reset()
	}
	for i, y := range labels {
		labels[i] = float32(math.Round(float64(y))) // random data's targets are uniform in [0, 1)
	}
	s := scores{samples: len(probs)}
	var err error
	if s.auc, err = metrics.AUC(probs, labels); err != nil {
		return s, fmt.Errorf("held-out AUC: %w", err)
	}
	if s.logLoss, err = metrics.LogLoss(probs, labels); err != nil {
		return s, fmt.Errorf("held-out log loss: %w", err)
	}
	if s.accuracy, err = metrics.Accuracy(probs, labels); err != nil {
		return s, fmt.Errorf("held-out accuracy: %w", err)
	}
	return s, nil
}

// errDiverged is matched by the error of a run whose loss became NaN or
// infinite.
var errDiverged = errors.New("training diverged")

// trainResult is what a training run ends with.
type trainResult struct {
	best, last scores
	iterations int
	stopped    bool // by --mlperf-*-threshold
	rank       int  // this process's rank in the world that trained
	// checkpoint writes the state the run ended in to a file, as
	// --save-model writes it.
	checkpoint func(path string) error
}

// fit trains m on src as the flags say, printing to stdout, and returns
// the best and last held-out scores. When f is a checkpoint, training
// resumes where it was written: m holds its weights already, and fit puts
// back the optimizer's and the scheduler's state, the best score and the
// position. ml logs the run's MLPerf events (nil: none).
//
// In a world of several ranks (comm) each trains on its slice of every
// batch and DataParallel keeps the replicas equal; every rank evaluates
// (the same model on the same held-out data: the same decisions, with no
// message), rank 0 alone writes checkpoints.
func fit(o *options, m *models.DLRM, src source, f *modelFile, ml *mlperfLog, comm dist.Communicator, stdout, stderr io.Writer) (trainResult, error) {
	var res trainResult
	opt, err := newOptimizer(o, m)
	if err != nil {
		return res, err
	}
	weights := func() []nn.NamedTensor { return nn.StateDict(m) }
	var split *kiln.Optimized
	if o.DType == "bf16" {
		if split, err = splitBF16(m, opt); err != nil {
			return res, err
		}
		fmt.Fprintf(stdout, "bf16: %s\n", strings.Join(split.Applied, "; "))
		opt = split.Optimizer
		// The file holds the joined FP32 weights, as an FP32 run's does.
		weights = split.StateDict
	}
	var dp *dist.DataParallel
	if comm.Size() > 1 {
		if o.FusedEmb {
			return res, usagef("--fused-emb updates each table inside the backward pass from this rank's own gradient; with %d ranks the replicas would drift", comm.Size())
		}
		var opt dist.Options
		if split != nil {
			opt.Split = split.Split
		}
		if dp, err = dist.NewDataParallel(comm, m, opt); err != nil {
			return res, err
		}
		defer dp.Close()
		fmt.Fprintf(stdout, "%d ranks share each batch; %d gradient buckets a step\n", comm.Size(), dp.NumBuckets())
	}
	if o.FusedEmb {
		// After the split: the tables the optimizer holds are then the
		// BF16 tops.
		if err := optim.FuseSparse(opt, m.Emb.Weights()...); err != nil {
			return res, usagef("--fused-emb: %v", err)
		}
	}
	// The tables are most of the heap: let garbage build up to a few
	// steps' worth, not to their size.
	gcheadroom.Set(gcheadroom.DLRM)
	sched, err := optim.NewDLRMLRPolicy(opt, o.LRNumWarmupSteps, o.LRDecayStartStep, o.LRNumDecaySteps)
	if err != nil {
		return res, usagef("%v", err)
	}
	ml.config(o)
	perEpoch := src.trainLen()
	if o.NumBatches > 0 {
		perEpoch = min(perEpoch, o.NumBatches)
	}
	res.best.auc = math.Inf(-1)
	// pos is where training stands: Step, Epoch, EpochStep.
	pos := progress{Config: configOf(o, src)}
	if f != nil && f.ckpt != nil {
		// After the split and the fusing: the state lands on the tensors
		// the optimizer steps.
		if err := f.resume(perEpoch, opt, sched); err != nil {
			return res, err
		}
		pos.Step, pos.Epoch, pos.EpochStep = f.ckpt.Step, f.ckpt.Epoch, f.ckpt.EpochStep
		res.best, res.iterations = f.ckpt.Best.scores(), pos.Step
		fmt.Fprintf(stdout, "resuming from %s at iteration %d (%d/%d of epoch %d), best auc %.5f\n",
			f.Path, pos.Step, pos.EpochStep, perEpoch, pos.Epoch, res.best.auc)
	}
	res.checkpoint = func(path string) error {
		p := pos
		p.Best = res.best.saved()
		// Rank 0 writes; the others wait for its outcome and fail with it.
		return dist.OnRank0(comm, func() error { return saveCheckpoint(path, weights(), opt, sched, p) })
	}
	if o.SaveModel != "" {
		// Writes killed half-way leave their temporary files behind.
		stale, err := checkpoint.RemoveStale(o.SaveModel)
		for _, f := range stale {
			fmt.Fprintf(stdout, "removed %s, left by an interrupted checkpoint write\n", f)
		}
		if err != nil {
			return res, fmt.Errorf("--save-model: %w", err)
		}
	}
	var mlog *metricsLog
	if comm.Rank() == 0 {
		if mlog, err = openMetrics(o, stderr); err != nil {
			return res, err
		}
		defer mlog.close()
	}
	start := pos // where this process starts
	evaluate := func(epoch, it int) (bool, error) {
		pos.Step, pos.Epoch, pos.EpochStep = res.iterations, epoch, it
		if it == perEpoch {
			pos.Epoch, pos.EpochStep = epoch+1, 0
		}
		at := evalEpoch(epoch, it, src.trainLen())
		ml.evalStart(at)
		s, err := test(o, m, src)
		if err != nil {
			return false, err
		}
		res.last = s
		improved := s.auc > res.best.auc
		if improved {
			res.best = s
		}
		fmt.Fprintf(stdout, "Testing at - %d/%d of epoch %d, %v, best auc %.5f\n", it, perEpoch, epoch, s, res.best.auc)
		mlog.eval(res.iterations, epoch, s)
		if improved && o.SaveModel != "" {
			if err := res.checkpoint(o.SaveModel); err != nil {
				return false, err
			}
		}
		ml.evalStop(at, s.auc)
		aucReached := o.MLPerfAUCThreshold > 0 && s.auc >= o.MLPerfAUCThreshold
		stop := aucReached || (o.MLPerfAccThreshold > 0 && 100*s.accuracy >= o.MLPerfAccThreshold)
		if stop {
			ml.epochStop(epoch)
			ml.runStop(aucReached)
		}
		return stop, nil
	}
	// Each iteration's activations and gradients come from the arena and
	// go back to it at the iteration's end.
	arena := autograd.NewArena(0)
	for epoch := start.Epoch; epoch < o.NEpochs; epoch++ {
		ml.epochStart(epoch)
		bar := kiln.NewProgress(-1, kiln.ProgressOptions{Description: fmt.Sprintf("epoch %d", epoch), Quiet: o.Quiet, Writer: stderr})
		var lossSum float64
		var correct, seen, since, global int // global: all ranks' samples
		t0 := time.Now()
		// A resumed epoch starts at the first batch not done before the
		// checkpoint; the order is the uninterrupted run's.
		skip := 0
		if epoch == start.Epoch {
			skip = start.EpochStep
		}
		it := skip
		for b, err := range src.trainBatches(epoch, skip) {
			if err != nil {
				return res, err
			}
			if it == perEpoch {
				break
			}
			full := b.size
			b = shardBatch(b, comm.Rank(), comm.Size())
			var l *autograd.Tensor
			var p *autograd.Tensor
			var syncErr error
			var lr float64
			err := autograd.Try(func() {
				opt.ZeroGrad()
				p = m.Forward(arena.In(o.autocast(b.dense)), b.indices, b.offsets)
				l = loss(o, p, b.target)
				if dp == nil {
					l.Backward()
				} else {
					// Ranks' slices of a short last batch differ in size:
					// weighting each rank's mean by its share makes the
					// mean over ranks the batch's mean.
					autograd.Mul(l, autograd.Scalar(float32(b.size*comm.Size())/float32(full))).Backward()
					if syncErr = dp.Sync(); syncErr != nil {
						return
					}
				}
				lr = opt.LR(0)
				opt.Step()
				sched.Step()
			})
			if err == nil {
				err = syncErr
			}
			if err != nil {
				return res, fmt.Errorf("iteration %d of epoch %d: %w", it+1, epoch, err)
			}
			lv := l.Item()
			if math.IsNaN(lv) || math.IsInf(lv, 0) {
				return res, fmt.Errorf("iteration %d of epoch %d: loss %v: %w", it+1, epoch, lv, errDiverged)
			}
			c := countCorrect(float32s(p), b.target.Float32s())
			arena.Reset()
			bar.Update(b.size, lv, c)
			lossSum += lv * float64(b.size)
			correct += c
			seen += b.size
			global += full
			since++
			it++
			res.iterations++
			if it%o.PrintFreq == 0 || it == perEpoch {
				line := fmt.Sprintf("Finished training it %d/%d of epoch %d, ", it, perEpoch, epoch)
				if o.PrintTime {
					line += fmt.Sprintf("%.2f ms/it, ", 1e3*time.Since(t0).Seconds()/float64(since))
				}
				fmt.Fprintf(stdout, "%sloss %.6f, accuracy %.3f %%, %.0f samples/s\n", line, lossSum/float64(seen), 100*float64(correct)/float64(seen), bar.Throughput())
				mlog.train(res.iterations, epoch, lossSum/float64(seen), float64(correct)/float64(seen), lr, float64(global)/time.Since(t0).Seconds())
				lossSum, correct, seen, since, global, t0 = 0, 0, 0, 0, 0, time.Now()
			}
			if o.TestFreq > 0 && res.iterations%o.TestFreq == 0 && it != perEpoch {
				stop, err := evaluate(epoch, it)
				if err != nil || stop {
					bar.Finish()
					res.stopped = stop
					return res, err
				}
			}
		}
		bar.Finish()
		stop, err := evaluate(epoch, it)
		if err != nil || stop {
			res.stopped = stop
			return res, err
		}
		ml.epochStop(epoch)
	}
	ml.runStop(false)
	return res, nil
}

// countCorrect counts dlrm's correct predictions: round(p) == round(t),
// p rounded half to even as np.round does.
func countCorrect(p, t []float32) int {
	n := 0
	for i, v := range p {
		if math.RoundToEven(float64(v)) == math.Round(float64(t[i])) {
			n++
		}
	}
	return n
}

func train(o *options, stdout, stderr io.Writer) error {
	res, err := trainRun(o, stdout, stderr)
	if err != nil {
		return err
	}
	if res.rank != 0 {
		return nil // rank 0 reports
	}
	how := "done"
	if res.stopped {
		how = "stopped at the threshold"
	}
	fmt.Fprintf(stdout, "%s after %d iterations; best held-out %v\n", how, res.iterations, res.best)
	return nil
}

// trainRun is train up to its last line: it opens the data, builds the
// model (from --load-model's weights, or its checkpoint to resume) and
// fits it.
func trainRun(o *options, stdout, stderr io.Writer) (trainResult, error) {
	var res trainResult
	// Under mpirun (or srun) the ranks split each batch: --mini-batch-size
	// is the global batch, so a run resumes on any number of ranks.
	comm, err := dist.FromEnvironment()
	if err != nil {
		return res, err
	}
	defer comm.Close()
	comm = dist.Watch(comm, dist.DefaultTimeout) // a hung rank ends the job
	if comm.Rank() != 0 {
		stdout, o.Quiet = io.Discard, true // rank 0 reports
	}
	ml := newMLPerfLog(o, stdout)
	ml.runStart()
	src, err := openSource(o)
	if err != nil {
		return res, err
	}
	ml.samples(src)
	fmt.Fprintln(stdout, src.describe())
	if ps, ok := src.(*plantedSource); ok {
		if oracle, err := ps.oracleAUC(); err == nil {
			fmt.Fprintf(stdout, "oracle AUC of the held-out samples (their true probabilities): %.5f\n", oracle)
		}
	}
	var f *modelFile
	if o.LoadModel != "" {
		if f, err = readModelFile(o); err != nil {
			return res, err
		}
		if f.ckpt != nil {
			// Before the weights go in: a checkpoint of other tables
			// is named as such, not as a list of shape mismatches.
			if err := f.ckpt.Config.mismatch(f.Path, configOf(o, src)); err != nil {
				return res, fmt.Errorf("--load-model: %w", err)
			}
		}
	}
	m, err := buildModel(o, src, f)
	if err != nil {
		return res, err
	}
	res, err = fit(o, m, src, f, ml, comm, stdout, stderr)
	res.rank = comm.Rank()
	return res, err
}

func evaluate(o *options, stdout, _ io.Writer) error {
	src, err := openSource(o)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, src.describe())
	m, err := newModel(o, src)
	if err != nil {
		return err
	}
	if o.DType == "bf16" {
		// The tops of split weights are the BF16 model a --dtype bf16
		// training run computed with and tested, so evaluate scores the
		// file it saved as that run's test did.
		if _, err := amp.SplitModuleFunc(m, amp.AutocastParams); err != nil {
			return err
		}
	}
	s, err := test(o, m, src)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "held-out %v\n", s)
	return nil
}

// splitBF16 prepares m and its FP32 optimizer for --dtype bf16 training
// with kiln.Optimize, as IPEX's ipex.optimize(model, optimizer,
// dtype=torch.bfloat16) does for dlrm: the Linear weights and biases and
// the tables become split master weights (BF16 tops the model computes
// with, the low 16 bits kept beside them) and the optimizer its split,
// fused form, which applies the tables' row-sparse gradients to the FP32
// masters row by row.
func splitBF16(m *models.DLRM, opt optim.Optimizer) (*kiln.Optimized, error) {
	// DLRM has no images: channels-last has nothing to reorder.
	return kiln.Optimize(m, kiln.DType(autograd.BFloat16), kiln.ChannelsLast(false), kiln.WithOptimizer(opt))
}
