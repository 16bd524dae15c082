package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/autograd"
	"github.com/kilnml/kiln/datasets"
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/internal/checkpoint"
	"github.com/kilnml/kiln/metrics"
	"github.com/kilnml/kiln/nn"
	"github.com/kilnml/kiln/nn/models"
	"github.com/kilnml/kiln/optim"
)

// trainer holds a training run.
type trainer struct {
	o     *options
	data  *data
	model *models.ResNet
	opt   *optim.SGD
	sched optim.Scheduler
	// bf16 is what kiln.Optimize made of the model for --dtype bf16 (split
	// master weights), nil in float32.
	bf16 *kiln.Optimized
	// comm is the world of ranks training together (dist.Single alone);
	// dp keeps their replicas in step, nil in a world of one.
	comm dist.Communicator
	dp   *dist.DataParallel
	val  *datasets.DataLoader
	p    progress // where the run stands
	// saved is the step at which --checkpoint was last written, -1 before.
	saved int
	// metrics is the log of --metrics and --tensorboard (rank 0's), nil
	// when there is none; win holds the batches since its last record.
	metrics *metrics.Writer
	win     window
	// arena holds each step's activations and gradients, reset after it.
	arena  *autograd.Arena
	stdout io.Writer
	stderr io.Writer
}

func train(o *options, stdout, stderr io.Writer) error {
	// SIGINT or SIGTERM (a preempted job's notice) stop the run at the
	// next step boundary, with a checkpoint; a second one, for the
	// impatient, ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	// Under mpirun (or srun) the ranks split each batch; --batch-size is
	// the global batch, so a run resumes on any number of ranks.
	comm, err := dist.FromEnvironment()
	if err != nil {
		return err
	}
	defer comm.Close()
	comm = dist.Watch(comm, o.DistTimeout) // a hung rank ends the job
	if w := comm.Size(); w > 1 {
		if o.BatchSize%w != 0 {
			return fmt.Errorf("--batch-size %d: not a multiple of the %d ranks sharing each batch", o.BatchSize, w)
		}
		if comm.Rank() != 0 {
			stdout, o.Quiet = io.Discard, true // rank 0 reports
		}
	}
	var resume *weights
	if o.Resume != "" {
		var err error
		if resume, err = readWeights("resume", o.Resume); err != nil {
			return err
		}
		if err := checkResume(o, resume); err != nil {
			return err
		}
	}
	d, err := loadData(o, true, o.NumClasses)
	if err != nil {
		return err
	}
	if o.Data != "synthetic" && o.set["num-classes"] && o.NumClasses != d.classes {
		return fmt.Errorf("--num-classes %d: --data %s has %d classes", o.NumClasses, o.Data, d.classes)
	}
	if d.train.Len() < o.BatchSize {
		return fmt.Errorf("--batch-size %d: larger than the %d training images (an epoch would have no full batch)", o.BatchSize, d.train.Len())
	}
	if resume != nil && resume.ckpt.NumClasses != d.classes {
		return fmt.Errorf("--resume %s has %d classes, --data %s has %d", o.Resume, resume.ckpt.NumClasses, o.Data, d.classes)
	}
	t := &trainer{o: o, data: d, saved: -1, stdout: stdout, stderr: stderr, comm: comm}
	t.p = progress{Arch: o.Arch, NumClasses: d.classes, BatchSize: o.BatchSize, Seed: o.Seed, ImageSize: o.ImageSize}
	if t.model, err = newModel(o, d.classes); err != nil {
		return err
	}
	if t.opt, err = optim.NewSGD(nn.Parameters(t.model), optim.SGDOptions{LR: o.LR, Momentum: o.Momentum, WeightDecay: o.WD}); err != nil {
		return err
	}
	if t.sched, err = optim.NewCosineAnnealingLR(t.opt, o.Epochs, 0); err != nil {
		return err
	}
	if resume != nil {
		if err := resume.loadInto("resume", t.model); err != nil {
			return err
		}
		if err := resume.restore(t.opt, t.sched); err != nil {
			return err
		}
		t.p.Step, t.p.Epoch, t.p.EpochStep = resume.ckpt.Step, resume.ckpt.Epoch, resume.ckpt.EpochStep
		if t.p.EpochStep >= t.perEpoch() {
			return fmt.Errorf("--resume: %w", &checkpoint.Error{File: o.Resume, Field: "epoch_step",
				Err: fmt.Errorf("%d steps into an epoch, but an epoch of this data has %d", t.p.EpochStep, t.perEpoch())})
		}
	}
	if o.DType == "bf16" {
		if err := t.splitBF16(); err != nil {
			return err
		}
	}
	if t.val, err = evalLoader(o, d.val); err != nil {
		return err
	}
	if comm.Size() > 1 {
		opt := dist.Options{Timeout: o.DistTimeout, BucketBytes: int(o.BucketMB * (1 << 20))}
		if t.bf16 != nil {
			opt.Split = t.bf16.Split
		}
		if t.dp, err = dist.NewDataParallel(comm, t.model, opt); err != nil {
			return err
		}
		defer t.dp.Close()
		fmt.Fprintf(stdout, "%d ranks, %d images each per batch, %d gradient buckets a step\n", comm.Size(), o.BatchSize/comm.Size(), t.dp.NumBuckets())
	}

	fmt.Fprintf(stdout, "%s, %d classes, %d training and %d held-out images of %d×%d, batch %d, lr %g, %s\n",
		o.Arch, d.classes, d.train.Len(), d.val.Len(), o.ImageSize, o.ImageSize, o.BatchSize, t.opt.LR(0), layout(o))
	if resume != nil {
		fmt.Fprintf(stdout, "resuming from %s at step %d (epoch %d, %d steps into it)\n", o.Resume, t.p.Step, t.p.Epoch+1, t.p.EpochStep)
	}
	if !t.more() {
		fmt.Fprintf(stdout, "nothing to do: %d steps taken, %d of %d epochs done (raise --steps or --epochs)\n", t.p.Step, t.p.Epoch, o.Epochs)
		return nil
	}
	if o.Checkpoint != "" {
		// Writes killed half-way leave their temporary files behind.
		stale, err := checkpoint.RemoveStale(o.Checkpoint)
		for _, f := range stale {
			fmt.Fprintf(stdout, "removed %s, left by an interrupted checkpoint write\n", f)
		}
		if err != nil {
			return fmt.Errorf("--checkpoint: %w", err)
		}
	}
	if comm.Rank() == 0 {
		if t.metrics, err = openMetrics(o); err != nil {
			return err
		}
		defer t.closeMetrics()
	}
	for t.more() {
		if err := t.epoch(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil && t.more() {
			return t.interrupted(context.Cause(ctx))
		}
	}
	return nil
}

// interrupted reports a run stopped by a signal, which is a success when
// the checkpoint to continue from has been written.
func (t *trainer) interrupted(cause error) error {
	at := fmt.Sprintf("at step %d (epoch %d, %d steps into it)", t.p.Step, t.p.Epoch+1, t.p.EpochStep)
	if t.o.Checkpoint == "" {
		return fmt.Errorf("%v: stopped %s, with no --checkpoint to continue from", cause, at)
	}
	fmt.Fprintf(t.stdout, "%v: stopped %s; continue with --resume %s\n", cause, at, t.o.Checkpoint)
	return nil
}

// checkResume fails when a checkpoint cannot continue this run.
func checkResume(o *options, w *weights) error {
	c := w.ckpt
	switch {
	case c == nil:
		return fmt.Errorf("--resume %s: not a train checkpoint (no %s tensor); a state dict can be evaluated, not resumed", o.Resume, checkpoint.RecordKey)
	case c.Arch != o.Arch:
		return w.checkArch("resume", o.Arch)
	case c.BatchSize != o.BatchSize:
		return fmt.Errorf("--resume %s was written with --batch-size %d, not %d: the epoch's position is counted in batches", o.Resume, c.BatchSize, o.BatchSize)
	case c.Seed != o.Seed:
		return fmt.Errorf("--resume %s was written with --seed %d, not %d: the data order would change", o.Resume, c.Seed, o.Seed)
	}
	return nil
}

// newModel builds --arch for classes classes, initialised from --seed.
func newModel(o *options, classes int) (*models.ResNet, error) {
	return models.ResNetByName(autograd.NewGenerator(o.Seed), o.Arch,
		models.ResNetOptions{NumClasses: classes, ChannelsLast: o.ChannelsLast, ZeroInitResidual: o.ZeroInit})
}

func layout(o *options) string {
	if o.ChannelsLast {
		return "channels-last"
	}
	return "contiguous"
}

// more reports whether the run has steps left.
func (t *trainer) more() bool {
	return t.p.Epoch < t.o.Epochs && (t.o.Steps == 0 || t.p.Step < t.o.Steps)
}

// perEpoch is the number of (full) batches in an epoch.
func (t *trainer) perEpoch() int { return t.data.train.Len() / t.o.BatchSize }

// order returns the training images of an epoch in visiting order: a
// permutation that depends only on --seed and the epoch, so a resumed run
// can skip straight to where it stopped.
func (t *trainer) order(epoch int) []int {
	return autograd.NewGenerator(t.o.Seed ^ (uint64(epoch)+1)*0x9e3779b97f4a7c15).Perm(t.data.train.Len())
}

// epoch trains the rest of the current epoch, or up to the step limit,
// then evaluates on the held-out images and writes the checkpoint. It
// writes one every --checkpoint-every steps, too, and stops early, with no
// evaluation, once ctx is done.
func (t *trainer) epoch(ctx context.Context) error {
	o, p := t.o, &t.p
	skip := p.EpochStep * o.BatchSize
	world := t.comm.Size()
	indices := shard(t.order(p.Epoch)[skip:], o.BatchSize, t.comm.Rank(), world)
	loader, err := datasets.NewDataLoader(&datasets.Subset{Dataset: t.data.train, Indices: indices},
		datasets.LoaderOptions{BatchSize: o.BatchSize / world, DropLast: true, Workers: o.Workers, ChannelsLast: o.ChannelsLast})
	if err != nil {
		return err
	}
	if t.data.augmented != nil {
		t.data.augmented.SetEpoch(p.Epoch)
	}
	name := fmt.Sprintf("epoch %d/%d", p.Epoch+1, o.Epochs)
	desc := name
	if world > 1 {
		desc += " (rank 0's share)"
	}
	batches := loader.Len()
	if o.Steps > 0 {
		batches = min(batches, o.Steps-p.Step)
	}
	bar := kiln.NewProgress(batches*o.BatchSize/world, kiln.ProgressOptions{Description: desc, Quiet: o.Quiet, Writer: t.stderr})
	nn.Train(t.model, true)
	epoch := p.Epoch
	t.win = window{start: time.Now()}
	for batch, err := range loader.Epoch(0) {
		if err != nil {
			return err
		}
		if stop, err := t.stopping(ctx); err != nil || stop {
			if err != nil {
				return err
			}
			break
		}
		var loss float64
		var right int
		var syncErr error
		if err := autograd.Try(func() { loss, right, syncErr = t.step(batch) }); err != nil || syncErr != nil {
			return fmt.Errorf("step %d: %w", p.Step+1, errors.Join(err, syncErr))
		}
		if err := t.checkFinite(loss); err != nil {
			return err
		}
		p.Step++
		p.EpochStep++
		bar.Update(len(batch.Indices), loss, right)
		t.win.add(len(batch.Indices), loss, right)
		if p.Step%o.MetricsEvery == 0 {
			t.logTrain()
		}
		if !t.more() {
			break
		}
		if every := o.CheckpointEvery; every > 0 && p.Step%every == 0 && p.EpochStep < t.perEpoch() {
			if err := t.save(); err != nil {
				return err
			}
		}
	}
	bar.Finish()
	fmt.Fprintln(t.stdout, bar)
	t.logTrain()
	if p.EpochStep == t.perEpoch() {
		t.sched.Step()
		p.Epoch++
		p.EpochStep = 0
	}
	if t.data.val.Len() > 0 && ctx.Err() == nil && t.comm.Rank() == 0 {
		acc, err := accuracy(t.model, t.val, t.o.autocast)
		if err != nil {
			return err
		}
		fmt.Fprintf(t.stdout, "%s held-out %v after %d steps\n", name, acc, p.Step)
		t.logEval(epoch, acc)
	}
	return t.save()
}

// save writes --checkpoint, if there is one and it is not up to date.
func (t *trainer) save() error {
	if t.o.Checkpoint == "" || t.saved == t.p.Step {
		return nil
	}
	// Rank 0 writes (the replicas are equal), atomically; the others wait
	// for its outcome, so no rank goes on past a checkpoint that failed.
	err := dist.OnRank0(t.comm, func() error {
		return saveCheckpoint(t.o.Checkpoint, t.modelState(), t.opt, t.sched, t.p)
	})
	if err != nil {
		return err
	}
	t.saved = t.p.Step
	return nil
}

// stopping reports whether the run should stop before the next step:
// ctx is done (SIGINT, SIGTERM) on this rank or, under mpirun, any rank,
// so all ranks stop after the same step.
func (t *trainer) stopping(ctx context.Context) (bool, error) {
	return dist.Any(t.comm, ctx.Err() != nil)
}

// shard returns rank's part of each full batch of order when world ranks
// share batches of batch images: the rank-th of world equal slices, so
// the global batches, and a run's course, do not depend on world.
func shard(order []int, batch, rank, world int) []int {
	if world == 1 {
		return order
	}
	per := batch / world
	out := make([]int, 0, len(order)/world)
	for lo := 0; lo+batch <= len(order); lo += batch {
		out = append(out, order[lo+rank*per:lo+(rank+1)*per]...)
	}
	return out
}

// checkFinite stops a run whose step (the next one, not yet counted) gave
// a loss or left a weight or gradient that is NaN or infinite: training
// cannot recover, and the checkpoint it would write is worthless.
func (t *trainer) checkFinite(loss float64) error {
	step := t.p.Step + 1
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return fmt.Errorf("step %d: the loss is %v: training diverged (too large a --lr?); the last checkpoint is left as it was", step, loss)
	}
	if err := kiln.CheckFinite(t.model); err != nil {
		return fmt.Errorf("step %d: training diverged: %w; the last checkpoint is left as it was", step, err)
	}
	return nil
}

// step trains on one batch (this rank's share of it) and returns its mean
// loss and how many images it classified right.
func (t *trainer) step(b datasets.Batch) (float64, int, error) {
	if t.arena == nil {
		t.arena = autograd.NewArena(0)
	}
	defer t.arena.Reset()
	logits := t.model.Forward(t.arena.In(t.o.autocast(b.Inputs)))
	loss := autograd.CrossEntropy(logits, b.Labels, autograd.CrossEntropyOptions{})
	t.opt.ZeroGrad()
	loss.Backward()
	if t.dp != nil {
		if err := t.dp.Sync(); err != nil {
			return 0, 0, err
		}
	}
	t.opt.Step()
	return loss.Item(), topK(logits, b.Labels, 1), nil
}

// splitBF16 turns the FP32 model and optimizer (resumed or fresh) into BF16
// training with kiln.Optimize: the convolution and linear weights become
// split master weights (BF16 tops the model computes with, low halves kept
// beside them) and the SGD the split, fused one, carrying over its state.
// The schedule is rebuilt on the new optimizer with the old one's state.
func (t *trainer) splitBF16() error {
	res, err := kiln.Optimize(t.model, kiln.DType(autograd.BFloat16), kiln.ChannelsLast(t.o.ChannelsLast), kiln.WithOptimizer(t.opt))
	if err != nil {
		return err
	}
	sgd, ok := res.Optimizer.(*optim.SGD)
	if !ok {
		return fmt.Errorf("kiln.Optimize returned a %T, want *optim.SGD", res.Optimizer)
	}
	// Building a schedule sets the learning rate; the state dict taken
	// before puts the resumed one back.
	sd, schedState := sgd.StateDict(), t.sched.State()
	sched, err := optim.NewCosineAnnealingLR(sgd, t.o.Epochs, 0)
	if err != nil {
		return err
	}
	if err := sgd.LoadStateDict(sd); err != nil {
		return err
	}
	if err := sched.LoadState(schedState); err != nil {
		return err
	}
	t.opt, t.sched, t.bf16 = sgd, sched, res
	return nil
}

// modelState is the model's state dict in FP32 (split weights joined).
func (t *trainer) modelState() []nn.NamedTensor {
	if t.bf16 != nil {
		return t.bf16.StateDict()
	}
	return nn.StateDict(t.model)
}
