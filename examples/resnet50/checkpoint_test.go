package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/internal/checkpoint"
	"github.com/kilnml/kiln/nn"
)

// childEnv makes the test binary run the program instead of the tests, so
// that TestKillAndResume can kill it.
const childEnv = "RESNET50_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestCheckpointErrors resumes from checkpoints with a bad progress record
// or damaged data: each is refused with an error naming the file and the
// field, never a panic or a run that goes on from nonsense.
func TestCheckpointErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("checks records, not kernels: make test runs it at the best kernel level; skipped with -short")
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	runOK(t, cmdline("train", tiny, "--steps", "1", "--checkpoint", good)...)
	var goodP progress
	goodTs, _, err := checkpoint.Read(good, &goodP)
	if err != nil {
		t.Fatal(err)
	}
	// edited writes good's record and tensors as edit changes them.
	edited := func(name string, edit func(p *progress, ts []nn.NamedTensor) []nn.NamedTensor) string {
		p, ts := goodP, slices.Clone(goodTs)
		path := filepath.Join(dir, name+".safetensors")
		if err := checkpoint.Write(path, p, edit(&p, ts)); err != nil {
			t.Fatal(err)
		}
		return path
	}
	record := func(name string, edit func(p *progress)) string {
		return edited(name, func(p *progress, ts []nn.NamedTensor) []nn.NamedTensor { edit(p); return ts })
	}
	damaged := filepath.Join(dir, "damaged.safetensors")
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(damaged, b, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, path, field string
	}{
		{"epoch_step -8", record("epoch_step", func(p *progress) { p.EpochStep = -8 }), "epoch_step"},
		{"epoch_step past the epoch", record("epoch_step_big", func(p *progress) { p.Step, p.EpochStep = 9, 4 }), "epoch_step"},
		{"epoch -1", record("epoch", func(p *progress) { p.Epoch = -1 }), "epoch"},
		{"step -100", record("step", func(p *progress) { p.Step = -100 }), "step"},
		{"version 99", record("version", func(p *progress) { p.Version = 99 }), "version"},
		{"scheduler ahead", record("scheduler", func(p *progress) { p.Scheduler.LastEpoch = 3 }), "scheduler.LastEpoch"},
		{"missing momentum buffer", edited("momentum", func(_ *progress, ts []nn.NamedTensor) []nn.NamedTensor {
			return deleteTensor(t, ts, "optimizer.state.5.momentum_buffer")
		}), "optimizer.state.5.momentum_buffer"},
		{"momentum buffer of the wrong shape", edited("shape", func(_ *progress, ts []nn.NamedTensor) []nn.NamedTensor {
			i := findTensor(t, ts, "optimizer.state.5.momentum_buffer")
			ts[i].Tensor = ts[findTensor(t, ts, "optimizer.state.0.momentum_buffer")].Tensor
			return ts
		}), "optimizer"},
		{"checksum mismatch", damaged, checkpoint.ChecksumKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(cmdline("train", tiny, "--resume", c.path), &stdout, &stderr)
			want := fmt.Sprintf("checkpoint %s: %s: ", c.path, c.field)
			if code != 1 || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "goroutine ") {
				t.Errorf("exit status %d, stderr:\n%s\nwant status 1 and %q", code, &stderr, want)
			}
		})
	}
	// The errors are *checkpoint.Error values; a damaged file's wraps
	// checkpoint.ErrChecksum.
	_, err = readWeights("resume", record("typed", func(p *progress) { p.Step = -1 }))
	if e, ok := errors.AsType[*checkpoint.Error](err); !ok || e.Field != "step" {
		t.Errorf("readWeights of step -1 = %v, want a *checkpoint.Error for field step", err)
	}
	if _, err := readWeights("weights", damaged); !errors.Is(err, checkpoint.ErrChecksum) {
		t.Errorf("readWeights of a damaged file = %v, want one wrapping checkpoint.ErrChecksum", err)
	}
}

func findTensor(t *testing.T, ts []nn.NamedTensor, name string) int {
	t.Helper()
	for i, nt := range ts {
		if nt.Name == name {
			return i
		}
	}
	t.Fatalf("no tensor %s", name)
	return -1
}

func deleteTensor(t *testing.T, ts []nn.NamedTensor, name string) []nn.NamedTensor {
	i := findTensor(t, ts, name)
	return slices.Delete(ts, i, i+1)
}

// TestDivergedRunKeepsCheckpoint trains with a learning rate that makes
// the loss NaN at the second step: the run fails naming the step, and the
// checkpoint of the first step stays, loadable.
func TestDivergedRunKeepsCheckpoint(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt.safetensors")
	var stdout, stderr bytes.Buffer
	code := run(cmdline("train", tiny, "--lr", "1e30", "--checkpoint", ckpt, "--checkpoint-every", "1"), &stdout, &stderr)
	if want := "step 2: the loss is NaN"; code != 1 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("exit status %d, stderr:\n%s\nwant status 1 and %q", code, &stderr, want)
	}
	w, err := readWeights("resume", ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if w.ckpt.Step != 1 {
		t.Errorf("the checkpoint left is of step %d, want 1", w.ckpt.Step)
	}
}

// TestCheckFiniteNamesParameter checks the trainer's guard on a model whose
// weight went NaN while the loss stayed finite.
func TestCheckFiniteNamesParameter(t *testing.T) {
	o := &options{Arch: "resnet18", Seed: 1}
	m, err := newModel(o, 3)
	if err != nil {
		t.Fatal(err)
	}
	tr := &trainer{o: o, model: m, p: progress{Step: 41}}
	if err := tr.checkFinite(2.5); err != nil {
		t.Fatalf("checkFinite of a fresh model = %v", err)
	}
	nn.StateDict(m)[findTensor(t, nn.StateDict(m), "layer2.0.conv1.weight")].Tensor.Float32s()[3] = float32(math.Inf(1))
	err = tr.checkFinite(2.5)
	if e, ok := errors.AsType[*kiln.NonFiniteError](err); !ok || e.Name != "layer2.0.conv1.weight" || !strings.Contains(err.Error(), "step 42: ") {
		t.Errorf("checkFinite = %v, want step 42 and a *kiln.NonFiniteError for layer2.0.conv1.weight", err)
	}
	if err := tr.checkFinite(math.Inf(-1)); err == nil || !strings.Contains(err.Error(), "step 42: the loss is -Inf") {
		t.Errorf("checkFinite of an infinite loss = %v", err)
	}
}

// TestInterrupted checks what a run stopped by a signal says: where to
// continue from, or, with no checkpoint, that its work is lost (an error).
func TestInterrupted(t *testing.T) {
	cause := errors.New("interrupt signal received")
	for _, c := range []struct {
		checkpoint, want string
		fails            bool
	}{
		{"r18.safetensors", "interrupt signal received: stopped at step 6 (epoch 2, 2 steps into it); continue with --resume r18.safetensors\n", false},
		{"", "interrupt signal received: stopped at step 6 (epoch 2, 2 steps into it), with no --checkpoint to continue from", true},
	} {
		var stdout bytes.Buffer
		tr := &trainer{o: &options{Checkpoint: c.checkpoint}, p: progress{Step: 6, Epoch: 1, EpochStep: 2}, stdout: &stdout}
		err := tr.interrupted(cause)
		got := stdout.String()
		if c.fails {
			got = fmt.Sprint(err)
		}
		if (err != nil) != c.fails || got != c.want {
			t.Errorf("interrupted with --checkpoint %q: error %v, output %q; want %q", c.checkpoint, err, stdout.String(), c.want)
		}
	}
}

// TestKillAndResume is the preemption test. A run writing a checkpoint
// every step is SIGKILLed and resumed six times, at moments of three
// kinds: any time after it has written a checkpoint (mostly in a step),
// while it writes one (its temporary file exists), and any time from its
// start (often while it starts up); and once it is stopped with SIGTERM.
// Then it runs to its end. After each kill the checkpoint loads and is no
// older than before; the final checkpoint is byte for byte that of a run
// that never stopped, and no temporary file is left. The random times are
// drawn from a seed the log shows.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes and checks files, not kernels: make test runs it at the best kernel level; skipped with -short")
	}
	dir := t.TempDir()
	args := cmdline("train", tiny, "--epochs", "4") // 16 steps
	want := filepath.Join(dir, "uninterrupted.safetensors")
	start := time.Now()
	runOK(t, append(args, "--checkpoint", want)...)
	perStep := time.Since(start) / 16

	ckpt := filepath.Join(dir, "ckpt.safetensors")
	args = append(args, "--checkpoint", ckpt, "--checkpoint-every", "1")
	seed := uint64(time.Now().UnixNano())
	t.Logf("random times drawn with seed %d, %v a step", seed, perStep)
	rng := rand.New(rand.NewPCG(seed, 0))
	pause := func() { time.Sleep(time.Duration(rng.Int64N(int64(2 * perStep)))) }
	step := 0 // the checkpoint's, which must never go back
	var removed int
	for i, how := range []string{"after a write", "in a write", "from the start", "SIGTERM", "in a write", "after a write", "from the start"} {
		c := startChild(t, args, ckpt)
		switch how {
		case "after a write", "SIGTERM":
			c.waitWrite(t)
			pause()
		case "in a write":
			c.waitTemp(t, filepath.Join(dir, "."+filepath.Base(ckpt)+".tmp*"))
		case "from the start":
			pause()
		}
		if how == "SIGTERM" {
			if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		} else {
			c.cmd.Process.Kill()
		}
		out, err := c.wait()
		if how != "SIGTERM" && c.cmd.ProcessState.Exited() {
			// Not killed: it ended on its own, before the signal.
			if err != nil {
				t.Fatalf("kill %d (%s): the child failed: %v, output:\n%s", i+1, how, err, out)
			}
			t.Logf("kill %d (%s): the child finished the run first", i+1, how)
		}
		removed += strings.Count(out, "left by an interrupted checkpoint write")
		if _, err := os.Stat(ckpt); err != nil {
			t.Logf("kill %d (%s): no checkpoint yet", i+1, how)
			continue
		}
		w, rerr := readWeights("resume", ckpt)
		if rerr != nil {
			t.Fatalf("kill %d (%s): %v", i+1, how, rerr)
		}
		if w.ckpt.Step < step {
			t.Fatalf("kill %d (%s): the checkpoint went back from step %d to %d", i+1, how, step, w.ckpt.Step)
		}
		step = w.ckpt.Step
		t.Logf("kill %d (%s): checkpoint of step %d", i+1, how, step)
		if how == "SIGTERM" && (err != nil || !strings.Contains(out, fmt.Sprintf("terminated signal received: stopped at step %d ", step))) {
			t.Errorf("SIGTERM: %v (want exit status 0), checkpoint of step %d, output:\n%s", err, step, out)
		}
	}
	runOK(t, append(args, "--resume", ckpt)...)
	t.Logf("%d stale temporary files removed on the way, whole test %v", removed, time.Since(start))
	a, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("the killed and resumed run ends with another checkpoint than the uninterrupted one: %s", differ(t, want, ckpt))
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*.tmp*")); len(tmp) > 0 {
		t.Errorf("temporary files left behind: %q", tmp)
	}
}

// child is the program running in a child process.
type child struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{} // closed when it has exited
	err  error
	ckpt string
	prev os.FileInfo // the checkpoint as the child found it
}

// startChild runs train with args in a child process, resuming from ckpt
// when there is one.
func startChild(t *testing.T, args []string, ckpt string) *child {
	t.Helper()
	c := &child{done: make(chan struct{}), ckpt: ckpt}
	if fi, err := os.Stat(ckpt); err == nil {
		c.prev = fi
		args = append(slices.Clone(args), "--resume", ckpt)
	}
	c.cmd = exec.Command(os.Args[0], args...)
	c.cmd.Env = append(os.Environ(), childEnv+"=1")
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	return c
}

// waitWrite waits until the child has replaced the checkpoint, or has
// exited.
func (c *child) waitWrite(t *testing.T) {
	t.Helper()
	for {
		select {
		case <-c.done:
			return
		case <-time.After(5 * time.Millisecond):
		}
		if fi, err := os.Stat(c.ckpt); err == nil && (c.prev == nil || !os.SameFile(fi, c.prev)) {
			return
		}
	}
}

// waitTemp waits until a file matching pattern exists, or the child has
// exited.
func (c *child) waitTemp(t *testing.T, pattern string) {
	t.Helper()
	for {
		select {
		case <-c.done:
			return
		case <-time.After(time.Millisecond):
		}
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return
		}
	}
}

// wait waits for the child to exit and returns its output.
func (c *child) wait() (string, error) {
	<-c.done
	return c.out.String(), c.err
}

// differ says where checkpoints a and b differ.
func differ(t *testing.T, a, b string) string {
	var pa, pb progress
	ta, _, err := checkpoint.Read(a, &pa)
	if err != nil {
		t.Fatal(err)
	}
	tb, _, err := checkpoint.Read(b, &pb)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pa) != fmt.Sprint(pb) {
		return fmt.Sprintf("progress %+v and %+v", pa, pb)
	}
	for _, x := range ta {
		y := tb[findTensor(t, tb, x.Name)]
		if !reflect.DeepEqual(x.Tensor.Data(), y.Tensor.Data()) {
			return "tensor " + x.Name
		}
	}
	return "nowhere in their values"
}
